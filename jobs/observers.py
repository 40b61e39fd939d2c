"""Every job transition, told to what watches it: the project's Django signals
(`jobs.signals`), the Prometheus metrics (`jobs.metrics`) and, where
OpenTelemetry is installed, the attempt's span (`jobs.tracing`).

One place, so that the runner's settle paths and the operator's verbs say
what happened once and every observer hears the same thing, at the same
moment: after the transaction that made it true has committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction

from jobs import signals, tracing
from jobs.history import Outcome
from jobs.metrics.tally import tally


def enqueued(rows: Sequence[Any], using: str) -> None:
    """`rows` (`jobs.store.NewJob`s) were inserted: counted, and each told to
    `job_enqueued`, once the transaction on `using` commits."""
    transaction.on_commit(lambda: tally.enqueued(rows), using=using)
    if signals.job_enqueued.receivers:  # anyone, for any kind: ask per row
        for row in rows:
            signals.on_commit(
                signals.job_enqueued,
                row.kind,
                using,
                job_id=row.id,
                key=row.key,
                queue=row.queue,
                priority=row.priority,
                run_at=row.run_at,
                using=using,
            )


def finished(job: Any, outcome: Outcome, now: datetime) -> None:
    """The attempt `job` describes settled at `now` as `outcome`, committed."""
    _attempt_ended(job, outcome, now)
    signals.send(signals.job_finished, job.kind, job=job, attempt=job.attempts, outcome=outcome)


def finished_on_commit(
    job: Any, outcome: Outcome, database: str, now: datetime, *, ran: bool = True
) -> None:
    """`finished`, once the transaction settling `job` on `database` commits.

    `ran` False for an operator's cancel of a job no attempt was running:
    `job_finished` still says so, the metrics count no attempt's end.
    """
    if ran:
        transaction.on_commit(lambda: _attempt_ended(job, outcome, now), using=database)
    signals.on_commit(
        signals.job_finished, job.kind, database, job=job, attempt=job.attempts, outcome=outcome
    )


def _attempt_ended(job: Any, outcome: Outcome, now: datetime) -> None:
    tally.finished((job,), outcome, now)
    tracing.finished(job, outcome)


def all_done(jobs: list[Any], now: datetime) -> None:
    """The attempts of `jobs`, a batch settled together, ended `done` at `now`."""
    tally.finished(jobs, Outcome.DONE, now)
    tracing.all_finished(jobs, Outcome.DONE)
    if signals.job_finished.receivers:  # anyone, for any kind: ask per job
        for job in jobs:
            signals.send(
                signals.job_finished, job.kind, job=job, attempt=job.attempts, outcome=Outcome.DONE
            )


def unsettled(job: Any) -> None:
    """An attempt of `job` ended without a settle of its own (it lost its row,
    or its settle failed): its span, if any, ends with no outcome."""
    tracing.forget(job)


def started(jobs: Sequence[Any], now: datetime) -> None:
    """The attempts of `jobs` were claimed at `now` and handed to workers."""
    tally.started(jobs, now)
