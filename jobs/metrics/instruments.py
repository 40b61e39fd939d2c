"""The metrics every process records into prometheus_client's default registry.

Recorded where the work happens: `jobs_enqueued_total` by the process that
enqueued (a web process, a handler, the scheduler), the attempt metrics by
the runner that ran them. A runner exposes its own with `runjobs
--metrics-port`; a project exposing the default registry itself (its own
`/metrics`, django-prometheus) gets the web processes' enqueue counts there.

Under a supervisor (`runjobs --processes N --metrics-port`), each child
records into files in `PROMETHEUS_MULTIPROC_DIR` (prometheus_client's
multiprocess mode, chosen when the child imports it), which the supervisor's
endpoint sums: counters over every child that ever ran, the per-runner gauges
over live children only.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from jobs.metrics.buckets import DURATION_BUCKETS, WAIT_BUCKETS

enqueued = Counter(
    "jobs_enqueued",
    "Jobs queued, counted when the enqueue's transaction commits (a refused duplicate is not).",
    ["kind", "queue"],
)
attempts_started = Counter(
    "jobs_attempts_started",
    "Attempts claimed and handed to a worker.",
    ["kind", "queue"],
)
attempts_finished = Counter(
    "jobs_attempts_finished",
    "Attempts settled, by outcome (as jobs.signals.OUTCOMES): done, retry, failed, "
    "timed_out, cancelled (an operator's cancel while it ran) or released (handed back "
    "at shutdown).",
    ["kind", "queue", "outcome"],
)
attempt_duration = Histogram(
    "jobs_attempt_duration_seconds",
    "Seconds from an attempt's claim to its settle.",
    ["kind"],
    buckets=DURATION_BUCKETS,
)
wait = Histogram(
    "jobs_wait_seconds",
    "Seconds a job waited from when it was due (enqueued, or its run_at if later) to its claim.",
    ["queue"],
    buckets=WAIT_BUCKETS,
)
running = Gauge(
    "jobs_running",
    "Attempts a runner holds: running, or finished and awaiting their settle.",
    ["runner"],
    multiprocess_mode="livesum",
)
slots_free = Gauge(
    "jobs_slots_free",
    "A runner's free slots: its share of max_concurrent less what it holds.",
    ["runner"],
    multiprocess_mode="livesum",
)
