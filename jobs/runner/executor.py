"""One attempt, as a pipeline of small steps: refuse or run, classify, settle, abandon once.

Runs on a worker thread with that thread's own database connection. Every
settle goes through the store's compare-and-set, so whichever of the worker
and the producer's timeout gets to an attempt first settles it, and a late
result is discarded rather than written.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import traceback
import uuid
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.db import DatabaseError, connections

from jobs import log, retirement
from jobs.backoff import retry_delay
from jobs.handlers import Done, Failed, Outcome, Reschedule, Retry
from jobs.models import Job, State
from jobs.retirement import first_line, job_fields
from jobs.runner.attempt import Attempt
from jobs.spec import strict_json
from jobs.store import Store

Clock = Callable[[], datetime]


class Executor:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        on_done: Callable[[Attempt, Done], None] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        #: Where a `Done` goes to be settled in a batch; settled here when None.
        self.on_done = on_done

    # -- the pipeline ----------------------------------------------------------

    def execute(self, attempt: Attempt) -> None:
        """Run `attempt` to its settle; called on a worker thread."""
        refusal = attempt.unusable or self.refusal(attempt.job, self.clock())
        if refusal is not None:
            if attempt.take():
                self.guarded(self.retire, attempt, refusal, self.clock())
            return
        outcome = self.run(attempt)
        if not attempt.take():
            log.event(
                "job_result_discarded",
                logging.WARNING,
                outcome="discarded",
                **job_fields(attempt.job),
                reason="the attempt was already settled as timed out",
            )
            return
        if isinstance(outcome, Done) and self.on_done is not None:
            attempt.handed_off = True
            self.on_done(attempt, outcome)
            return
        self.guarded(self.settle, attempt, outcome, self.clock())

    def complete_many(self, batch: list[tuple[Attempt, Done]], now: datetime) -> None:
        """Settle a batch of `Done` attempts at once; a loser is logged, never written."""
        try:
            won = self.store.complete_many([(a.job, d.result) for a, d in batch], now)
        except Exception as error:
            self.settle_failed(batch, error)
            return
        self.report_done(batch, won)

    def report_done(self, batch: list[tuple[Attempt, Done]], won: set[uuid.UUID]) -> None:
        """Log each settled `Done`, and each that lost its row to a newer claim."""
        log_done = log.enabled(logging.DEBUG)
        if not log_done and len(won) == len(batch):
            return  # every one won (the ids of a batch are distinct): nothing to say
        for attempt, _ in batch:
            if attempt.job.id in won:
                if log_done:
                    log.event("job_done", logging.DEBUG, outcome="done", **job_fields(attempt.job))
            else:
                self.lost(attempt.job, "done")

    def settle_failed(self, batch: list[tuple[Attempt, Done]], error: Exception) -> None:
        """A batch settle failed: the rows stay running until their leases expire."""
        for attempt, _ in batch:
            log.event(
                "job_settle_failed",
                logging.ERROR,
                outcome="failure",
                **job_fields(attempt.job),
                error=repr(error),
            )
        if isinstance(error, DatabaseError):
            connections[self.store.using].close_if_unusable_or_obsolete()

    def time_out(self, attempt: Attempt, now: datetime) -> bool:
        """Settle an overrunning attempt as a timed-out retry; False if it had settled."""
        if not attempt.take():
            return False
        reason = (
            f"attempt {attempt.job.attempts} timed out after {attempt.budget.total_seconds():g}s"
        )
        log.event(
            "job_timed_out",
            logging.WARNING,
            outcome="timeout",
            **job_fields(attempt.job),
            budget=attempt.budget,
        )
        self.guarded(self.settle, attempt, Retry(reason), now)
        return True

    @staticmethod
    def refusal(job: Job, now: datetime) -> str | None:
        """Why a claimed row must be retired without running, or None to run it."""
        if job.attempts > job.max_attempts:
            return (
                f"attempts exhausted: claim {job.attempts} of a budget of {job.max_attempts}; "
                "the last attempt never settled (its runner died or lost its lease)"
            )
        if job.deadline is not None and job.deadline <= now:
            return (
                f"deadline {job.deadline.isoformat()} passed "
                f"before attempt {job.attempts} could run"
            )
        return None

    def run(self, attempt: Attempt) -> Outcome:
        """Call the handler; any exception, or a non-outcome, becomes a Retry."""
        handler, job = attempt.handler, attempt.job
        try:
            if _is_coroutine_function(handler.run):
                result = asyncio.run(_bounded(handler.run(job), attempt.budget))
            else:
                result = handler.run(job)
        except BudgetExpired:
            return Retry(
                f"attempt {job.attempts} timed out after {attempt.budget.total_seconds():g}s"
            )
        except Exception:
            return Retry(traceback.format_exc())
        if isinstance(result, Done) and result.result is not None:
            try:
                strict_json(result.result)
            except (TypeError, ValueError) as error:
                return Retry(
                    f"{type(handler).__name__}.run returned a Done "
                    f"whose result is not JSON: {error}"
                )
        if isinstance(result, Reschedule) and not isinstance(result.delay, timedelta):
            return Retry(
                f"{type(handler).__name__}.run returned {result!r}, whose delay is not a timedelta"
            )
        if isinstance(result, (Done, Retry, Failed, Reschedule)):
            return result
        return Retry(
            f"{type(handler).__name__}.run returned {result!r}, "
            "not Done, Retry, Failed or Reschedule"
        )

    def settle(self, attempt: Attempt, outcome: Outcome, now: datetime) -> None:
        job = attempt.job
        if isinstance(outcome, Done):
            if self.store.complete(job, now, outcome.result):
                log.event("job_done", logging.DEBUG, outcome="done", **job_fields(job))
            else:
                self.lost(job, "done")
        elif isinstance(outcome, Retry):
            self.retry(attempt, outcome.reason, now)
        elif isinstance(outcome, Failed):
            self.retire(attempt, outcome.reason, now)
        else:
            run_at = _after(now, outcome.delay)
            if run_at is None:
                self.retire(
                    attempt,
                    f"Reschedule({outcome.delay!r}) puts the next run past the latest instant "
                    f"a date can hold ({_LATEST.isoformat()})",
                    now,
                )
            elif self.store.reschedule(job, now, run_at):
                log.event(
                    "job_rescheduled",
                    outcome="reschedule",
                    **job_fields(job),
                    next_run_at=run_at.isoformat(),
                )
            else:
                self.lost(job, "reschedule")

    def retry(self, attempt: Attempt, reason: str, now: datetime) -> None:
        job, settings = attempt.job, attempt.settings
        if job.attempts >= job.max_attempts:
            self.retire(
                attempt,
                f"gave up after {job.attempts} of {job.max_attempts} attempts: {reason}",
                now,
            )
            return
        run_at = _after(
            now,
            retry_delay(job.attempts, settings.retry_base_seconds, settings.retry_max_seconds),
        )
        if run_at is None:
            self.retire(
                attempt,
                f"the next attempt would fall past the latest instant a date can hold "
                f"({_LATEST.isoformat()}): {reason}",
                now,
            )
            return
        if job.deadline is not None and run_at >= job.deadline:
            self.retire(
                attempt,
                f"deadline {job.deadline.isoformat()} comes before the next attempt at "
                f"{run_at.isoformat()}: {reason}",
                now,
            )
            return
        if self.store.retry(job, now, run_at, reason):
            log.event(
                "job_retry",
                outcome="retry",
                **job_fields(job),
                next_run_at=run_at.isoformat(),
                error=first_line(reason),
            )
        else:
            self.lost(job, "retry")

    def retire(
        self, attempt: Attempt, reason: str, now: datetime, state: str = State.FAILED
    ) -> bool:
        """Retire the job and call `abandon` once (`jobs.retirement.retire`)."""
        if retirement.retire(self.store, attempt.job, attempt.handler, reason, now, state):
            return True
        self.lost(attempt.job, "retire")
        return False

    def lost(self, job: Job, verb: str) -> None:
        log.event(
            "job_settle_lost",
            logging.WARNING,
            outcome="lost",
            **job_fields(job),
            settle=verb,
            reason="the attempt no longer owns the row",
        )

    def guarded(self, step: Callable[..., object], attempt: Attempt, *args: object) -> None:
        """Run a settle step; a failure is logged and the lease left to expire.

        The row stays `running`, so after its lease another runner takes it
        and the spent attempt is counted: the settle is lost, never the job.
        """
        try:
            step(attempt, *args)
        except Exception as error:
            log.event(
                "job_settle_failed",
                logging.ERROR,
                outcome="failure",
                **job_fields(attempt.job),
                error=repr(error),
                traceback=traceback.format_exc(),
            )
            if isinstance(error, DatabaseError):
                connections[self.store.using].close_if_unusable_or_obsolete()


class BudgetExpired(Exception):
    """An async attempt was cancelled at its budget (not a TimeoutError of its own)."""


async def _bounded(coroutine: object, budget: timedelta) -> object:
    """Await `coroutine`, cancelling it at `budget`.

    Only the budget's own expiry becomes `BudgetExpired`; a TimeoutError the
    handler raised itself (a socket timeout, say) stays an ordinary exception
    with its traceback.
    """
    deadline = asyncio.timeout(budget.total_seconds())
    try:
        async with deadline:
            return await coroutine  # type: ignore[misc]
    except TimeoutError:
        if deadline.expired():
            raise BudgetExpired from None
        raise


#: The latest instant a `datetime` can hold.
_LATEST = datetime.max.replace(tzinfo=UTC)


def _after(moment: datetime, delay: timedelta) -> datetime | None:
    """`moment + delay`, or None when that is past the latest instant a datetime holds.

    Near year 9999 (a clock or a row far in the future) the sum overflows;
    the caller retires the job with a reason rather than crash its settle and
    leave the row to be claimed again and again.
    """
    try:
        return moment + delay
    except OverflowError:
        return None


def _is_coroutine_function(method: Callable[..., object]) -> bool:
    """`inspect.iscoroutinefunction`, remembered per function: it unwraps
    partials and decorators on every call, a cost paid for every attempt."""
    function = getattr(method, "__func__", method)
    try:
        return _COROUTINE_FUNCTIONS[function]
    except (KeyError, TypeError):  # new, or not hashable
        answer = inspect.iscoroutinefunction(method)
        with contextlib.suppress(TypeError):
            _COROUTINE_FUNCTIONS[function] = answer
        return answer


_COROUTINE_FUNCTIONS: weakref.WeakKeyDictionary[object, bool] = weakref.WeakKeyDictionary()
