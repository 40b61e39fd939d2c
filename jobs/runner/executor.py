"""One attempt, as a pipeline of small steps: refuse or run it within its budget,
classify how it ended, and hand that to the completer.

The executor settles nothing itself: every outcome, whatever it is, goes to
the completer (`jobs.runner.completer`), so there is one path from a finished
attempt to its row. `execute` runs on a worker thread with that thread's own
database connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import traceback
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta

from jobs.handlers import Done, Failed, Outcome, Reschedule, Retry
from jobs.models import Job
from jobs.runner.attempt import Attempt
from jobs.runner.completer import Completer
from jobs.spec import strict_json

Clock = Callable[[], datetime]


class Executor:
    """Runs the attempts of one runner, handing each outcome to `completer`."""

    def __init__(self, completer: Completer, clock: Clock) -> None:
        self.completer = completer
        self.clock = clock

    # -- the pipeline (on a worker thread) -------------------------------------

    def execute(self, attempt: Attempt) -> None:
        """Refuse or run `attempt`, and hand how it ended to the completer."""
        try:
            refusal = attempt.unusable or self.refusal(attempt.job, self.clock())
            if refusal is not None:
                self.completer.refused(attempt, refusal)
                return
            outcome = self.run(attempt)
        except BaseException:
            # `run` makes every Exception a Retry; what escapes it anyway (a
            # SystemExit, say) leaves no outcome to settle: the slot is freed
            # and the row left to its lease, as a crash would leave it.
            self.completer.let_go(attempt)
            raise
        self.completer.ended(attempt, outcome)

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
