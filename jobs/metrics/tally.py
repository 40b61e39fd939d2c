"""Recording the runner's metrics a pass at a time.

A runner settles thousands of attempts a second; one Prometheus update per
job (a lock, a label lookup, and under a supervisor a write to a mapped
file, for each of four metrics) would be a cost of its own. So what happens
is noted as plain tuples (an append, from any thread), and `flush` applies
them together: one counter increment per kind and queue, one histogram
update per label and bucket, whatever the number of jobs. The runner's loop
flushes once per pass (`jobs.runner.producer`); outside a runner (a web
process cancelling a running job) each note is applied at once.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import Histogram

from jobs.metrics import instruments


class _Job(Protocol):
    kind: str
    queue: str
    run_at: datetime
    created_at: datetime
    started_at: datetime | None


#: (kind, queue, outcome, seconds the attempt took, or None when none ran).
Finished = tuple[str, str, str, float | None]


class Tally:
    """The notes of one process's runners, waiting for the next `flush`."""

    def __init__(self) -> None:
        self._started: collections.deque[tuple[str, str, float]] = collections.deque()
        self._finished: collections.deque[Finished] = collections.deque()
        self._lock = threading.Lock()
        #: How many runners of this process flush per pass: while none does,
        #: a note is applied as it is made.
        self._flushers = 0

    def hold(self) -> None:
        """A runner starts flushing once per pass."""
        with self._lock:
            self._flushers += 1

    def release(self) -> None:
        """A runner stops flushing: apply what it left."""
        with self._lock:
            self._flushers = max(0, self._flushers - 1)
        self.flush()

    # -- notes, from any thread ------------------------------------------------

    def started(self, jobs: Iterable[_Job], now: datetime) -> None:
        """The attempts of `jobs` were claimed at `now`."""
        self._started.extend(
            (job.kind, job.queue, (now - max(job.run_at, job.created_at)).total_seconds())
            for job in jobs
        )
        self._unless_held()

    def finished(self, job: _Job, outcome: str, now: datetime, *, ran: bool = True) -> None:
        """An attempt of `job` settled at `now` as `outcome`; `ran` False for
        a cancel that found no attempt running (counted, with no duration)."""
        seconds = _since(job.started_at, now) if ran else None
        self._finished.append((job.kind, job.queue, outcome, seconds))
        self._unless_held()

    def all_done(self, jobs: Iterable[_Job], now: datetime) -> None:
        """The attempts of `jobs`, a batch, settled `done` at `now`."""
        self._finished.extend(
            (job.kind, job.queue, "done", _since(job.started_at, now)) for job in jobs
        )
        self._unless_held()

    def _unless_held(self) -> None:
        if not self._flushers:
            self.flush()

    # -- applying them ---------------------------------------------------------

    def flush(self) -> None:
        """Apply every note made so far, a few updates for the lot."""
        started = _take(self._started)
        finished = _take(self._finished)
        if started:
            counts: collections.Counter[tuple[str, str]] = collections.Counter()
            waits: dict[str, list[float]] = collections.defaultdict(list)
            for kind, queue, waited in started:
                counts[kind, queue] += 1
                waits[queue].append(max(0.0, waited))
            for (kind, queue), n in counts.items():
                instruments.attempts_started.labels(kind, queue).inc(n)
            for queue, values in waits.items():
                observe_many(instruments.wait, (queue,), values)
        if finished:
            outcomes: collections.Counter[tuple[str, str, str]] = collections.Counter()
            durations: dict[str, list[float]] = collections.defaultdict(list)
            for kind, queue, outcome, seconds in finished:
                outcomes[kind, queue, outcome] += 1
                if seconds is not None:
                    durations[kind].append(seconds)
            for labels, n in outcomes.items():
                instruments.attempts_finished.labels(*labels).inc(n)
            for kind, values in durations.items():
                observe_many(instruments.attempt_duration, (kind,), values)


def runner_gauges(runner: str, running: int, free: int) -> None:
    """A runner's slots as its pass left them."""
    instruments.running.labels(runner).set(running)
    instruments.slots_free.labels(runner).set(free)


def forget_runner(runner: str) -> None:
    """A runner stopped: its gauges go with it."""
    for gauge in (instruments.running, instruments.slots_free):
        with contextlib.suppress(KeyError):
            gauge.remove(runner)


def observe_many(histogram: Histogram, labels: tuple[str, ...], values: list[float]) -> None:
    """`histogram.labels(*labels).observe(v)` for each of `values`, as one
    update per bucket that any of them falls in.

    prometheus_client has no bulk observe; this adds to the child's buckets
    and sum as `observe` would (a value goes in the first bucket whose upper
    bound it does not exceed), and falls back to one `observe` per value should
    a release change those internals (a test holds it to the one-by-one result).
    """
    child: Any = histogram.labels(*labels)
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            child.observe(value)
        return
    per_bucket: collections.Counter[int] = collections.Counter(
        bisect.bisect_left(bounds, value) for value in values
    )
    total.inc(sum(values))
    for index, n in per_bucket.items():
        buckets[index].inc(n)


def _since(started_at: datetime | None, now: datetime) -> float:
    return 0.0 if started_at is None else max(0.0, (now - started_at).total_seconds())


def _take(notes: collections.deque[Any]) -> list[Any]:
    """Pop what `notes` holds now (others may append meanwhile: those wait)."""
    taken = []
    try:
        for _ in range(len(notes)):
            taken.append(notes.popleft())
    except IndexError:  # another flush took the rest
        pass
    return taken


#: The one tally of this process: every runner in it notes into it and
#: flushes it; `jobs.observers` notes into it from the settle paths.
tally = Tally()
