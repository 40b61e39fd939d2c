"""Rows written straight into the tables, for every layer: `make_job` for tests about
showing, counting and acting on rows; `set_row` and `add_ready_job` for writes made
as another process would make them.

An area whose tests want other defaults (another kind, a row that is not due yet,
nothing implied by its state) binds them next to its tests with
`functools.partial` or a one-line wrapper, so each call there reads as before.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobs import history
from jobs.models import Job, JobsConfig, RunnerProcess, State

#: The test app's recording handler (tests/jobapp/jobs.py): its abandon writes an
#: `Abandonment` row, so a test can see that abandon ran, and how often.
RECORDED = "test.record"

SETTLED = (State.DONE, State.FAILED, State.CANCELLED)


def make_job(
    key: str,
    state: str = State.QUEUED,
    kind: str = RECORDED,
    *,
    finished: bool = True,
    leased: bool = True,
    **fields: Any,
) -> Job:
    """A row in any state, written directly: no `enqueue`, no runner.

    Every row has `max_attempts=5` and `run_at=now`. What its state implies comes
    too, unless turned off: with `finished`, a settled row (done, failed,
    cancelled) has `finished_at=now`; with `leased`, a running row has
    `attempts=1`, `started_at=now` and a lease that ends in five minutes. A field
    given in `fields` always wins, `created_at` included (written after the
    insert, since the model stamps it there).
    """
    now = timezone.now()
    values: dict[str, Any] = {"max_attempts": 5, "run_at": now, **fields}
    if finished and state in SETTLED:
        values.setdefault("finished_at", now)
    if leased and state == State.RUNNING:
        values.setdefault("attempts", 1)
        values.setdefault("started_at", now)
        values.setdefault("lease_expires_at", now + timedelta(minutes=5))
    created_at = values.pop("created_at", None)
    job = Job.objects.create(kind=kind, key=key, state=state, **values)
    if created_at is not None:
        Job.objects.filter(id=job.id).update(created_at=created_at)
    return job


def set_row(**values: int) -> None:
    """Change the live config row (`JobsConfig`) as another process would: no signal
    reaches this one."""
    JobsConfig.load()
    JobsConfig.objects.filter(pk=JobsConfig.SINGLETON_ID).update(**values)


def add_ready_job(kind: str, key: str) -> Job:
    """A ready row written without the enqueue doorbell, as from another process."""
    now = timezone.now()
    return Job.objects.create(kind=kind, key=key, max_attempts=5, run_at=now - timedelta(seconds=1))


def entry_for(
    job: Job, error: str, outcome: history.Outcome = history.Outcome.FAILED
) -> history.Entry:
    """The attempt record's entry a runner would write for `job`'s current
    attempt ending with `error`, for tests that settle through a store."""
    return history.record(
        attempt=job.attempts,
        started_at=job.started_at,
        ended_at=timezone.now(),
        runner=job.claimed_by,
        outcome=outcome,
        error=error,
    )


def make_runner_row(
    hostname: str,
    kinds: list[str],
    heartbeat_at: datetime,
    queues: list[str] | None = None,
    **fields: Any,
) -> RunnerProcess:
    """A runner's presence row, written directly: last heard from at
    `heartbeat_at`; a field given in `fields` wins."""
    values: dict[str, Any] = {
        "pid": 1,
        "version": "test",
        "started_at": heartbeat_at - timedelta(hours=1),
        "max_concurrent": 4,
        "running": 1,
        **fields,
    }
    return RunnerProcess.objects.create(
        hostname=hostname, heartbeat_at=heartbeat_at, kinds=kinds, queues=queues, **values
    )
