"""Retirement: a job settled for good, and its handler told so at most once.

A job is retired by the runner (a `Failed`, a `Retry` with no attempt or time
left, a claimed row it must not run) or cancelled by an operator (the admin,
`manage.py jobs cancel`, both through `jobs.operations.cancel`), or by the
schedules' reconcile. Either way it happens in two steps, each its own
transaction:

1. The retirement: the row settles and, in the same short write, marks its
   handler's `abandon` owed (`Job.abandon_owed_at`); the lifecycle hooks
   write what follows from it in that transaction too (`jobs.lifecycle`:
   a schedule's next occurrence), unless told not to. It commits whatever
   `abandon` will do, so no user code ever runs while the row is locked or
   the retirement's transaction is open: a slow `abandon`, or one whose
   connection the server ends (`idle_in_transaction_session_timeout`), can
   no longer roll a retirement back and have the job claimed and retired
   again.
2. The call, once the retirement has committed: one conditional statement
   claims the debt (`Store.claim_abandon` clears the mark, and only the
   process whose statement cleared it goes on), then `abandon` runs in a
   transaction of its own, so its writes commit or roll back together; if it
   raises, or its connection is killed, that is logged and the retirement
   stands. Where this process has no handler for the kind (an operator's
   cancel in a web process without it), the debt is left, and a runner that
   has one pays it (`jobs.runner.maintenance`).

So `abandon` is called **at most once** per retirement, even across a crash:
a process that dies between the two steps leaves the mark, and a runner with
the handler pays it later (at its first pass, and every few seconds after, for
marks older than `GRACE`, so the retiring process pays its own first); one
that dies after the claim, before `abandon` returned, loses that call, and
the log shows it: `job_abandon_started` with no `job_abandoned` or
`job_abandon_failed` after it. At most once rather than at least once because
`abandon` is the subject's terminal notice (a refund, an e-mail, a status
pushed upstream), which a handler usually cannot make safe to repeat, and
because a call that can run again after any crash is what `run` already is:
work that must happen at least once belongs in a job of its own, queued from
`abandon` (its enqueue commits with `abandon`'s transaction).

Written once, here, outside the runner, so that the operator's verbs need not
import the runner to keep the promise.
"""

from __future__ import annotations

import functools
import logging
import traceback
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction

from jobs import history, lifecycle, log, observers, signals
from jobs.handlers import JobHandler
from jobs.history import Outcome
from jobs.models import Job, State
from jobs.presentation import telling_line
from jobs.store import Store

#: How old a debt must be before a process other than the one that retired
#: the job pays it (`jobs.runner.maintenance`): the retiring process claims
#: its own within milliseconds of its commit, so a mark older than this was
#: left by a crash or by a process without the handler. Only who pays hangs
#: on it, never how often: the claim lets one payer through.
GRACE = timedelta(seconds=10)


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
    `entry` for it in the attempt record; `abandon` is called once it commits.

    Fenced on that attempt, like every settle: False, with nothing written and
    nobody told, when the attempt no longer owns the row (the caller logs it).

    The row keeps, and `abandon` is told, the reason's telling line alone
    (`told`): "gave up after 3 of 3 attempts: RuntimeError: boom", never the
    traceback, which `entry` keeps for the attempt record.
    """
    reason = told(reason)
    with transaction.atomic(using=store.using):
        if not store.retire(job, now, reason, entry, state):
            return False
        job.state, job.last_error, job.finished_at, job.lease_expires_at = (
            state,
            reason,
            now,
            None,
        )
        job.abandon_owed_at = now
        log.event("job_failed", logging.WARNING, outcome=state, **job_fields(job), error=reason)
        timed_out = entry.outcome == history.Outcome.TIMED_OUT
        observers.finished_on_commit(
            job, Outcome.TIMED_OUT if timed_out else Outcome.FAILED, store.using, now
        )
        lifecycle.after_settle(store, job, now, state, job.started_at)
        owe(store, job, handler, reason)
    return True


def cancel(
    store: Store,
    job_id: uuid.UUID,
    handler: JobHandler | None,
    reason: str,
    now: datetime,
    *,
    by: str,
    hooks: bool = True,
) -> Job | None:
    """An operator's retirement of a live job as `cancelled`; the row as it was
    before, or None (nothing written, nobody told) if it was not live.

    Not fenced on an attempt: cancelling overrules whichever attempt holds the
    row, whose own settle then loses. The row is locked for the cancel's own
    write only; `abandon` is called once it commits (once the caller's
    transaction commits, inside one). `handler` is None where no handler for
    the job's kind is registered in this process: the debt is then left for a
    runner that has one, and that is logged. `hooks=False` tells no lifecycle
    hook (the schedules' reconcile, replacing or removing an occurrence itself).
    """
    reason = told(reason)
    with transaction.atomic(using=store.using):
        job = store.cancel(job_id, now, reason)
        if job is None:
            return None
        started = job.started_at if job.state == State.RUNNING else None
        job.state, job.last_error, job.finished_at = State.CANCELLED, reason, now
        log.event("job_cancelled", outcome="cancelled", job_id=job_id, kind=job.kind, by=by)
        observers.finished_on_commit(
            job, Outcome.CANCELLED, store.using, now, ran=started is not None
        )
        if hooks:
            lifecycle.after_settle(store, job, now, State.CANCELLED, started)
        if handler is None:
            log.event(
                "job_abandon_left",
                outcome="owed",
                job_id=job_id,
                kind=job.kind,
                reason="no handler for this kind in this process: "
                "a runner that has one calls abandon",
            )
        else:
            owe(store, job, handler, reason)
    return job


def told(reason: str) -> str:
    """What a retired row keeps in `last_error` and its handler's `abandon` is
    told: `reason`'s telling line (`jobs.presentation.telling_line`), one line.

    A traceback names server paths and runs to dozens of lines; an
    `abandon` passes its reason on (the orders example to its API's
    clients), and the screens show one line of it. The attempt record keeps
    the rest. One line, too, so that retired rows can be grouped by it.
    A reason with no telling line (blank) is kept as it is.
    """
    return telling_line(reason) or reason


def owe(store: Store, job: Job, handler: JobHandler, reason: str) -> None:
    """Pay the debt the retirement of `job` marks (`pay`) once the current
    transaction commits: at once where it is the outermost, else after the
    caller's; never if it rolls back (then nothing was retired)."""
    transaction.on_commit(functools.partial(pay, store, job, handler, reason), using=store.using)


def pay(store: Store, job: Job, handler: JobHandler, reason: str, *, late: bool = False) -> bool:
    """Claim the `abandon` call owed for `job`'s retirement and, if this process
    won the claim, make it (`abandon`); whether it did. `late` for a debt
    another process left (`jobs.runner.maintenance`): the log says since when.

    Outside any transaction, after the retirement committed. Raises nothing:
    a claim that fails leaves the debt owed, logged, for a runner's
    maintenance pass; one that another process won is left to it.
    """
    try:
        claimed = store.claim_abandon(job.id)
    except Exception as error:
        log.event(
            "job_abandon_claim_failed",
            logging.WARNING,
            outcome="owed",
            **job_fields(job),
            error=repr(error),
            reason="the debt stays owed: a runner with a handler for this kind pays it",
        )
        _drop_if_broken(store.using)
        return False
    if not claimed:
        return False
    since: dict[str, Any] = {"owed_since": job.abandon_owed_at} if late else {}
    log.event("job_abandon_started", outcome="started", **job_fields(job), **since)
    # A debt a process of an earlier version left holds the whole reason.
    abandon(handler, job, told(reason) if late else reason, store.using)
    return True


def abandon(handler: JobHandler, job: Job, reason: str, using: str) -> None:
    """Call `handler.abandon` in a transaction of its own: its writes commit
    together when it returns, or roll back when it raises (or its connection
    is lost), which is logged and changes nothing else. Call it only with the
    debt claimed (`pay`)."""
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
        _drop_if_broken(using)
    else:
        log.event("job_abandoned", outcome="abandoned", **job_fields(job), reason=reason)
        signals.on_commit(signals.job_abandoned, job.kind, using, job=job, reason=reason)


def _drop_if_broken(using: str) -> None:
    """Close this thread's connection if a failure left it unusable (the server
    ended it), so the next statement opens a fresh one; never inside a
    transaction, which only a test's wraps these calls in."""
    connection = connections[using]
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()


def job_fields(job: Job) -> dict[str, Any]:
    """The fields every log line about one attempt of a job carries (the
    runner's completer writes its events with them too)."""
    return {"job_id": job.id, "kind": job.kind, "key": job.key, "attempt": job.attempts}
