"""Start latency: how long a job waits between being queued and its handler's
first line.

As met: a process of its own (`enqueuer`) enqueues one job at a time, with
gaps, to a runner already running and idle in another; the stamp handler
keeps the time of its first line as its result. Each wait is read from just
before the `enqueue` call and from just before its COMMIT, on one machine's
wall clock. Measured again after a drain of 20,000 jobs has been settled and
swept, the table then full of dead rows. Favourable (the old benchmark's):
the driver enqueues in its own process and reads the claim's `started_at`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from django.db import transaction
from django.utils import timezone

from acmeproxy.benchmarks.bench import drains, stage
from acmeproxy.benchmarks.bench.measure import (
    AS_MET,
    FAVOURABLE,
    Result,
    latency_summary,
)
from acmeproxy.benchmarks.bench.runner import ROOT, Runner, child_env
from acmeproxy.benchmarks.jobs import NOOP, STAMP
from jobs import JobSpec, enqueue
from jobs.models import Job
from jobs.store import for_database
from jobs.sweep import BATCH


def from_another_process(runner: Runner, count: int, gap: float, key: str, label: str) -> Result:
    """`count` stamp jobs enqueued `gap` s apart by the enqueuer process."""
    prefix = f"l{uuid.uuid4().hex[:8]}-"
    done = subprocess.run(
        [sys.executable, "-m", "acmeproxy.benchmarks.bench.enqueuer", str(count), str(gap), prefix],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        check=True,
    )
    sent = {line["key"]: line for line in map(json.loads, done.stdout.splitlines())}
    ours = Job.objects.filter(kind=STAMP, key__startswith=prefix)
    runner.wait_for(lambda: ours.filter(state="done").count() < count)
    stamps = dict(ours.values_list("key", "result"))
    stage.clean()
    waits = [(stamps[key] - times["before"]) * 1000 for key, times in sent.items()]
    after_commit = [(stamps[key] - times["commit"]) * 1000 for key, times in sent.items()]
    calls = [(times["after"] - times["before"]) * 1000 for times in sent.values()]
    from_before = latency_summary(waits)
    return Result(
        key,
        label,
        AS_MET,
        {
            "jobs": count,
            "p50": from_before["p50"],
            "p95": from_before["p95"],
            "p99": from_before["p99"],
            "from_commit": latency_summary(after_commit),
            "one_enqueue_call_ms_p50": latency_summary(calls)["p50"],
        },
    )


def sweep() -> int:
    """Delete every settled row with the sweep's own verb and batch, as the
    retention sweep does to rows past `retention_days`; the rows deleted."""
    store, now, total = for_database(), timezone.now(), 0
    while (deleted := store.prune(now, BATCH)) > 0:
        total += deleted
    return total


def as_met(count: int, gap: float, drained: int) -> list[Result]:
    with stage.config(), Runner() as runner:
        stage.clean()
        idle = from_another_process(
            runner, count, gap, "latency.as_met", "start latency, enqueued in another process"
        )
        drains.into_running(runner, drained, "latency.drain", "", keep=True)
        swept = sweep()
        after = from_another_process(
            runner,
            count,
            gap,
            "latency.after_sweep",
            f"the same, after a drain of {drained:,} settled and swept",
        )
        after.numbers["swept_rows"] = swept
    return [idle, after]


def same_process(count: int, gap: float) -> Result:
    """The old figure: this process enqueues, the claim's `started_at` ends the wait."""
    committed: dict[str, float] = {}
    with stage.config(), Runner() as runner:
        stage.clean()
        for n in range(count):
            with transaction.atomic():
                enqueue(JobSpec.now(NOOP, f"s{n}"))
                committed[f"s{n}"] = time.time()
            time.sleep(gap)
        runner.wait_until_done(NOOP, count)
    waits = [
        (started.timestamp() - committed[key]) * 1000
        for key, started in Job.objects.filter(kind=NOOP).values_list("key", "started_at")
        if started is not None
    ]
    stage.clean()
    return Result(
        "latency.same_process",
        "start latency, enqueued in the driver's process, commit to claim",
        FAVOURABLE,
        {"jobs": count, **latency_summary(waits)},
    )
