"""Retirement: a job settled for good, and its handler told so exactly once.

A job is retired by the runner (a `Failed`, a `Retry` with no attempt or time
left, a claimed row it must not run) or cancelled by an operator (the admin,
`manage.py jobs cancel`, both through `jobs.operations.cancel`). Either way the
row settles and, in the same transaction, the handler's `abandon` is called in
a savepoint: its writes commit with the retirement, and if it raises they roll
back, the error is logged and the retirement still commits. It is never called
again, since the row is no longer live. A schedule's occurrence retired
either way has its successor queued in the same transaction
(`jobs.schedules.occurrences.follow`), unless the schedule itself is going.
Written once, here, outside the runner, so that the operator's verbs need not
import the runner to keep the promise.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction

from jobs import history, log, observers, signals
from jobs.handlers import JobHandler
from jobs.models import Job, State
from jobs.presentation import telling_line
from jobs.schedules import occurrences
from jobs.store import Store


def retire(
    store: Store,
    job: Job,
    handler: JobHandler,
    reason: str,
    entry: history.Entry,
    now: datetime,
    state: str = State.FAILED,
) -> bool:
    """The runner's retirement of the attempt `job` describes, as `state`, with
    `entry` for it in the attempt record.

    Fenced on that attempt, like every settle: False, with nothing written and
    nobody told, when the attempt no longer owns the row (the caller logs it).
    """
    with transaction.atomic(using=store.using):
        if not store.retire(job, now, reason, entry, state):
            return False
        job.state, job.last_error, job.finished_at, job.lease_expires_at = (
            state,
            reason,
            now,
            None,
        )
        log.event(
            "job_failed",
            logging.WARNING,
            outcome=state,
            **job_fields(job),
            error=telling_line(reason, trim=False),
        )
        timed_out = entry.outcome == history.Outcome.TIMED_OUT
        observers.finished_on_commit(job, "timed_out" if timed_out else "failed", store.using, now)
        abandon(handler, job, reason, store.using)
        occurrences.follow(store, job, now, state, job.started_at)
    return True


def cancel(
    store: Store,
    job_id: uuid.UUID,
    handler: JobHandler | None,
    reason: str,
    now: datetime,
    *,
    by: str,
    successor: bool = True,
) -> Job | None:
    """An operator's retirement of a live job as `cancelled`; the row as it was
    before, or None (nothing written, nobody told) if it was not live.

    Not fenced on an attempt: cancelling overrules whichever attempt holds the
    row, whose own settle then loses. `handler` is None where no handler for
    the job's kind is registered in this process: then `abandon` cannot be
    called, and that is logged. `successor=False` queues no next occurrence
    of a schedule (the reconcile replacing or removing it).
    """
    with transaction.atomic(using=store.using):
        job = store.cancel(job_id, now, reason)
        if job is None:
            return None
        started = job.started_at if job.state == State.RUNNING else None
        job.state, job.last_error, job.finished_at = State.CANCELLED, reason, now
        log.event("job_cancelled", outcome="cancelled", job_id=job_id, kind=job.kind, by=by)
        observers.finished_on_commit(job, "cancelled", store.using, now, ran=started is not None)
        if handler is None:
            log.event(
                "job_abandon_skipped",
                logging.WARNING,
                outcome="no_handler",
                job_id=job_id,
                kind=job.kind,
                reason="no handler for this kind in this process",
            )
        else:
            abandon(handler, job, reason, store.using)
        if successor:
            occurrences.follow(store, job, now, State.CANCELLED, started)
    return job


def abandon(handler: JobHandler, job: Job, reason: str, using: str) -> None:
    """Call `handler.abandon` inside the caller's transaction, in a savepoint.

    Its writes commit with the retirement around it; if it raises, they are
    rolled back, the error is logged, and the retirement still commits.
    """
    try:
        with transaction.atomic(using=using):
            handler.abandon(job, reason)
    except Exception as error:
        log.event(
            "job_abandon_failed",
            logging.ERROR,
            outcome="failure",
            **job_fields(job),
            error=telling_line(repr(error), trim=False),
            traceback=traceback.format_exc(),
        )
    else:
        log.event(
            "job_abandoned",
            outcome="abandoned",
            **job_fields(job),
            reason=telling_line(reason, trim=False),
        )
        signals.on_commit(signals.job_abandoned, job.kind, using, job=job, reason=reason)


def job_fields(job: Job) -> dict[str, Any]:
    """The fields every log line about one attempt of a job carries (the
    runner's completer writes its events with them too)."""
    return {"job_id": job.id, "kind": job.kind, "key": job.key, "attempt": job.attempts}
