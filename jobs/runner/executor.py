"""One attempt, as a pipeline of small steps: build it from a claim, refuse or
run it within its budget, classify how it ended, and hand that to the completer.
Each claimed row is first put to the lifecycle hooks (`jobs.lifecycle`), which
may have it skipped unrun (a disabled schedule's occurrence, say).

Budgets are resolved here, once per pass for every kind, because an attempt is
built under the budget its claim's lease was written for. The executor settles
nothing itself: every outcome, whatever it is, goes to the completer
(`jobs.runner.completer`), so there is one path from a finished attempt to its
row. `execute` runs on a worker thread with that thread's own database
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta

from jobs import history, lifecycle, log, signals, tracing
from jobs.config import JobsSettings
from jobs.handlers import JobHandler, Outcome, Retry
from jobs.models import Job
from jobs.registry import Registry
from jobs.runner import connection_budget, outcomes
from jobs.runner.attempt import Attempt, lease_for
from jobs.runner.completer import Completer
from jobs.store import Claim

Clock = Callable[[], datetime]


class Executor:
    """Runs the attempts of one runner, handing each outcome to `completer`."""

    def __init__(self, registry: Registry, completer: Completer, clock: Clock) -> None:
        self.registry = registry
        self.completer = completer
        self.clock = clock

    # -- building attempts (on the loop thread) --------------------------------

    def budgets(self, settings: JobsSettings, now: datetime) -> dict[str, timedelta]:
        """Each registered kind's attempt budget for a claim at `now`: what the
        claim writes each kind's lease from, and what `attempts` builds under."""
        return {handler.kind: self._budget(handler, settings, now) for handler in self.registry}

    def _budget(self, handler: JobHandler, settings: JobsSettings, now: datetime) -> timedelta:
        """The handler's own attempt budget, or the configured one when it has none.

        A `budget()` that is not a positive timedelta, or so long that the
        lease written from it would pass year 9999, would fail every claim for
        every kind; it is logged and the configured budget used instead.
        """
        try:
            budget = handler.budget()
            if budget is None:
                return settings.lease
            if not isinstance(budget, timedelta) or budget <= timedelta(0):
                raise TypeError(f"not a positive timedelta: {budget!r}")
            now + lease_for(budget)  # raises OverflowError past year 9999
        except Exception as error:
            log.event(
                "handler_lease_invalid",
                logging.ERROR,
                outcome="failure",
                kind=handler.kind,
                error=repr(error),
                using=f"lease_seconds ({settings.lease_seconds})",
            )
            return settings.lease
        return budget

    def attempts(
        self,
        claims: list[Claim],
        settings: JobsSettings,
        budgets: dict[str, timedelta],
        now: datetime,
    ) -> list[Attempt]:
        """An attempt for each claim made at `now` under `settings` and `budgets`,
        each claim logged (a takeover always, an ordinary claim at DEBUG only).

        A takeover's lost attempt is put on its record here, before any of
        the pass's attempts runs: one of them may kill the process at once (a
        poison job), and a note left to the taking attempt's own worker would
        then never be written.
        """
        attempts: list[Attempt] = []
        log_claims = log.enabled(logging.DEBUG)
        for claim in claims:
            job = claim.job
            handler = self.registry.get(job.kind)
            assert handler is not None, "a claim only returns kinds the registry has"
            attempt = Attempt(claim, handler, settings, budgets[job.kind], now)
            if claim.reclaimed or log_claims:
                log.event(
                    "job_reclaimed" if claim.reclaimed else "job_claimed",
                    logging.WARNING if claim.reclaimed else logging.DEBUG,
                    outcome="claimed",
                    job_id=job.id,
                    kind=job.kind,
                    key=job.key,
                    attempt=job.attempts,
                    lease_expires_at=job.lease_expires_at.isoformat()
                    if job.lease_expires_at
                    else "",
                )
            if attempt.previous is not None:
                self.completer.reclaimed(attempt, now)
            attempts.append(attempt)
        return attempts

    # -- the pipeline (on a worker thread) -------------------------------------

    def execute(self, attempt: Attempt) -> None:
        """Refuse or run `attempt`, and hand how it ended to the completer.

        An attempt settled before it started (timed out, or released at a
        stop, while it waited for a worker thread's turn: `pool`) is not run."""
        connection_budget.ready(self.completer.store)
        if attempt.taken:
            attempt.returned = True
            return
        try:
            refusal = attempt.unusable or self.refusal(attempt.job, self.clock())
            if refusal is not None:
                self.completer.refused(attempt, refusal)
                return
            if lifecycle.HOOKS:
                verdict = lifecycle.before_run(attempt.job, self.clock, self.completer.store.using)
                attempt.verdict = verdict
                if verdict is not None and verdict.skip is not None:
                    self.completer.skipped(attempt, verdict.skip)
                    return
            outcome = self.run(attempt)
        except BaseException:
            # `run` makes whatever the handler raises a Retry; what escapes
            # anyway came from the refusal or the completer, and leaves no
            # outcome to settle: the slot is freed and the row left to its
            # lease, as a crash would leave it. The pool keeps the thread.
            attempt.returned = True
            self.completer.let_go(attempt)
            raise
        attempt.returned = True
        self.completer.ended(attempt, outcome)

    @staticmethod
    def refusal(job: Job, now: datetime) -> str | None:
        """Why a claimed row must be retired without running, or None to run it."""
        if job.attempts > job.max_attempts:
            return history.exhausted(job)
        if job.deadline is not None and job.deadline <= now:
            return (
                f"deadline {job.deadline.isoformat()} passed "
                f"before attempt {job.attempts} could run"
            )
        return None

    def run(self, attempt: Attempt) -> Outcome:
        """Call the handler; anything it raises, or a non-outcome, becomes a
        Retry, and an outcome the runner cannot store or carry out the job's
        Failed (`jobs.runner.outcomes`, which says why).

        Anything means every BaseException, not only Exception. On a worker
        thread none of them is a request to stop: Python delivers SIGINT's
        KeyboardInterrupt to the main thread only (and `runjobs` handles its
        signals itself), so a SystemExit or KeyboardInterrupt here is the
        handler's own `sys.exit()` or a library's `exit()`; a CancelledError
        its own cancellation (the budget's is `BudgetExpired`); a
        GeneratorExit a bug. Each ends the attempt without an outcome, which
        is a failure; let through, it ended the thread silently (threading
        ignores SystemExit) and left the row `running` until its lease expired.
        So is a connection the server refused the handler's query: the
        attempt's `Retry`, settled on this thread like any other
        (`connection_budget.handler_failed` sees that the settle can have one).
        """
        handler, job = attempt.handler, attempt.job
        signals.send(signals.job_started, job.kind, job=job, attempt=job.attempts)
        try:
            if tracing.active():
                with tracing.attempt(job):
                    result = _call(handler, job, attempt.budget)
            else:  # no context manager at all: even a no-op one is a measurable cost per job
                result = _call(handler, job, attempt.budget)
        except BudgetExpired:
            reason = f"attempt {job.attempts} timed out after {attempt.budget.total_seconds():g}s"
            return Retry(reason, exception=history.AttemptTimedOut(reason))
        except BaseException as error:
            connection_budget.handler_failed(self.completer.store, error)
            return outcomes.raised(error)
        return outcomes.checked(handler, result)


def _call(handler: JobHandler, job: Job, budget: timedelta) -> object:
    """The handler's `run`, awaited within `budget` when it is a coroutine function."""
    if _is_coroutine_function(handler.run):
        return asyncio.run(_bounded(handler.run(job), budget))
    return handler.run(job)


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
