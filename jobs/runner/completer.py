"""Where every attempt's outcome is settled: the completer.

The executor hands it each finished attempt, whatever the outcome: `Done`,
`Retry`, `Failed`, `Reschedule`, a row refused without running, or nothing at
all; the producer's loop hands it the attempts that overran their budget. It
settles each in one of two ways:

- A `Done` waits, with the other `Done`s, for the producer's next pass, which
  settles the whole batch in the same statement and commit as its claim
  (`Store.settle_and_claim`): at a few thousand jobs a second, one commit per
  job would be the runner's largest cost. `done_batch` gives the producer the
  batch and `settle_done` settles it: the one entry every `Done` goes
  through, the pass's batch, the hooked jobs' `Done`s (a pass's together,
  before its claim: `settle_hooked`), and whatever still waits when the
  runner stops (`settle_batch`). A batch whose
  statement fails is settled row by row, so one row the database refuses
  costs only its own attempt (`jobs.runner.done_batch`).
- Anything else is settled at once by a fenced single-row settle on the
  worker's own connection (retry with backoff, retire, reschedule), since it
  is rarer and may have to call the handler's `abandon`.

Outcomes reach it checked (`jobs.runner.outcomes`): a result or a reason no
database would store never gets this far. Every settle is tried again, a few
times over a few seconds, on a transient database error
(`jobs.runner.settle_tries`); one that still fails leaves its row to its lease.

Every settle is fenced on its attempt (`jobs.store.base`): whichever of the
worker and the loop's timeout takes an attempt first settles it, a late result
is discarded, and a settle that lost its row is logged, never written; one
that won is told to `jobs.observers`. A settled attempt's slot is freed before
its finish rings the loop, so the pass that answers the ring finds it free.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from jobs import history, lifecycle, log, observers, retirement
from jobs.backoff import LATEST, after, next_attempt
from jobs.handlers import Done, Failed, Outcome, Reschedule, Retry
from jobs.models import Job
from jobs.presentation import telling_line
from jobs.retirement import job_fields
from jobs.runner.attempt import Attempt
from jobs.runner.done_batch import Claiming, DoneBatch, DoneSettles
from jobs.runner.presence import last_heard
from jobs.runner.settle_tries import SettleTries, settles_failed
from jobs.runner.slots import Slots
from jobs.store import Claim, Store

Clock = Callable[[], datetime]


class Completer:
    """Settles the attempts of one runner, whose slots are `slots`."""

    def __init__(self, store: Store, slots: Slots, clock: Clock) -> None:
        self.store = store
        self.slots = slots
        self.clock = clock
        #: Every settle's tries on a transient database error.
        self.tries = SettleTries(store.using)
        #: The `Done` attempts, settled together.
        self.batches = DoneSettles(store, slots, self.tries, self._lost, self._refused_outcome)
        #: Attempts that ended `Done` with their results, waiting for the
        #: next pass (`batches`' own queue, named here for the hot path).
        self._done = self.batches.done
        #: Those a lifecycle hook recognised, settled together before the
        #: pass's claim (`settle_hooked`).
        self._hooked = self.batches.hooked

    # -- from the executor, on a worker thread -----------------------------------

    def ended(self, attempt: Attempt, outcome: Outcome) -> None:
        """`attempt` ran and ended with `outcome`: queue a `Done` for the next
        pass, settle anything else now; discard it if the attempt was timed out."""
        if not attempt.take():
            log.event(
                "job_result_discarded",
                logging.WARNING,
                outcome="discarded",
                **job_fields(attempt.job),
                reason="the attempt was already settled as timed out",
            )
            self.let_go(attempt)
            return
        if isinstance(outcome, Done):
            if attempt.verdict is not None:
                self._hooked.append((attempt, outcome.result))
            else:
                self._done.append((attempt, outcome.result))
            self.slots.stopped(attempt)
            return
        try:
            self._guarded(self.settle, attempt, outcome, self.clock())
        finally:
            self.let_go(attempt)

    def skipped(self, attempt: Attempt, skip: lifecycle.Skip) -> None:
        """A lifecycle hook ruled that `attempt` must not run: `skip` moves its
        row unrun (a schedule's occurrence to its next fire time)."""
        try:
            if attempt.take():
                self._guarded(self._skip, attempt, skip, self.clock())
        finally:
            self.let_go(attempt)

    def _skip(self, attempt: Attempt, skip: lifecycle.Skip, now: datetime) -> None:
        with transaction.atomic(using=self.store.using):
            if not skip(self.store, attempt.job, now):
                self._lost(attempt.job, "skip")

    def refused(self, attempt: Attempt, reason: str) -> None:
        """`attempt`'s row must not run (see `Executor.refusal`): retire it unrun."""
        try:
            if attempt.take():
                now = self.clock()
                entry = history.for_attempt(
                    attempt.job, history.Outcome.FAILED, reason, history.JobNotRun(reason), now
                )
                self._guarded(self._retire, attempt, reason, entry, now)
        finally:
            self.let_go(attempt)

    def reclaimed(self, attempt: Attempt, now: datetime) -> None:
        """Write the record's entry for the attempt `attempt` took its row from,
        whose runner vanished; a failure to is logged and the attempt runs."""
        previous = attempt.previous
        assert previous is not None, "only a reclaimed attempt has one"
        self._guarded(self._note_lost, attempt, previous.runner, previous.started_at, now)

    def released(self, attempt: Attempt, now: datetime) -> None:
        """The runner stops with `attempt` still running past its grace: hand the
        row back, due now (its process exits next, taking the thread with it),
        its attempt counted and on the record as released. A result the
        handler returns meanwhile is discarded."""
        if not attempt.take():
            return  # it ended meanwhile: its settle is under way
        try:
            reason = "the runner stopped before the attempt ended (its grace period ran out)"
            error = history.AttemptReleased(reason)
            entry = history.for_attempt(attempt.job, history.Outcome.RELEASED, reason, error, now)
            self._guarded(self._release, attempt, now, reason, entry, now)
        finally:
            self.let_go(attempt)

    def _release(
        self, attempt: Attempt, run_at: datetime, reason: str, entry: history.Entry, now: datetime
    ) -> None:
        if self.store.retry(attempt.job, now, run_at, reason, entry):
            log.event("job_released", outcome="released", **job_fields(attempt.job), run_at=run_at)
            observers.finished(attempt.job, history.Outcome.RELEASED, now)
        else:
            self._lost(attempt.job, "release")

    def _note_lost(
        self, attempt: Attempt, runner: str, started_at: datetime | None, now: datetime
    ) -> None:
        heard = last_heard(self.store.using, runner)
        self._note(attempt, history.lost_attempt(attempt.job, runner, started_at, now, heard))

    def _note(self, attempt: Attempt, entry: history.Entry) -> None:
        if not self.store.note(attempt.job, entry):
            self._lost(attempt.job, "record")

    def let_go(self, attempt: Attempt) -> None:
        """Free `attempt`'s slot and ring for it: its row is settled, or is left to
        its lease (a worker that ended without an outcome, as a crash would)."""
        observers.unsettled(attempt.job)  # a no-op once its settle was told
        self.slots.settled((attempt,))
        self.slots.stopped(attempt)

    # -- from the producer, on the loop thread -----------------------------------

    def time_out(self, attempt: Attempt, now: datetime) -> bool:
        """Settle an overrunning attempt as a timed-out retry, free its slot and
        ring; False, touching nothing, if its worker had already taken it: that
        worker's settle frees the slot (a `Done` waiting in the batch holds it
        until the batch settles), so a pass never counts it free twice."""
        if not attempt.take():
            return False
        try:
            reason = (
                f"attempt {attempt.job.attempts} timed out "
                f"after {attempt.budget.total_seconds():g}s"
            )
            log.event(
                "job_timed_out",
                logging.WARNING,
                outcome="timeout",
                **job_fields(attempt.job),
                budget=attempt.budget,
            )
            timed_out = Retry(reason, exception=history.AttemptTimedOut(reason))
            self._guarded(self.settle, attempt, timed_out, now)
            return True
        finally:
            self.let_go(attempt)

    # The `Done` batch (`jobs.runner.done_batch.DoneSettles` says how).

    def done_batch(self) -> DoneBatch:
        """Take the `Done` attempts waiting, for the producer's pass."""
        return self.batches.take()

    def settle_done(
        self, batch: DoneBatch, now: datetime, claim: Claiming | None = None
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        """Settle `batch` at `now`, with the pass's `claim` in the same statement
        and commit when given; the ids won and the claims (`DoneSettles.settle`
        says how a failure is met)."""
        return self.batches.settle(batch, now, claim)

    def settle_hooked(self, now: datetime) -> None:
        """Settle the `Done` attempts of jobs a lifecycle hook recognised, waiting
        since the last pass, together in one transaction with the hooks'
        `after_settle_many` (a workflow's releases): a pass's worth at the cost
        of one, where each alone cost a transaction of its own. Before the
        pass's claim, so the steps they release are claimed in it."""
        if self._hooked:
            self.settle_done(self.batches.take_hooked(), now)

    def settle_batch(self, now: datetime) -> None:
        """Settle the `Done` attempts still waiting: for a runner that has stopped claiming."""
        self.settle_hooked(now)
        self.settle_done(self.batches.take(), now)

    def waiting(self) -> int:
        """How many `Done` attempts wait for a settle."""
        return len(self._done) + len(self._hooked)

    # -- the fenced single settles -----------------------------------------------

    def settle(self, attempt: Attempt, outcome: Retry | Failed | Reschedule, now: datetime) -> None:
        """Settle `attempt` as `outcome` now, on this thread's connection."""
        job = attempt.job
        if isinstance(outcome, Retry):
            self._retry(attempt, outcome, now)
        elif isinstance(outcome, Failed):
            entry = history.for_attempt(
                job, history.Outcome.FAILED, outcome.reason, outcome.exception, now
            )
            self._retire(attempt, outcome.reason, entry, now)
        else:
            run_at = after(now, outcome.delay)
            if run_at is None:
                reason = (
                    f"Reschedule({outcome.delay!r}) puts the next run past the latest instant "
                    f"a date can hold ({LATEST.isoformat()})"
                )
                entry = history.for_attempt(attempt.job, history.Outcome.FAILED, reason, None, now)
                self._retire(attempt, reason, entry, now)
            elif self.store.reschedule(job, now, run_at):
                log.event(
                    "job_rescheduled",
                    outcome="reschedule",
                    **job_fields(job),
                    next_run_at=run_at.isoformat(),
                )
            else:
                self._lost(job, "reschedule")

    def _retry(self, attempt: Attempt, retry: Retry, now: datetime) -> None:
        job, settings, reason = attempt.job, attempt.settings, retry.reason
        timed_out = isinstance(retry.exception, history.AttemptTimedOut)
        run_at, given_up = next_attempt(
            job.attempts,
            job.max_attempts,
            job.deadline,
            now,
            settings.retry_base_seconds,
            settings.retry_max_seconds,
        )
        if given_up or run_at is None:  # (run_at None comes with a reason)
            outcome = history.Outcome.TIMED_OUT if timed_out else history.Outcome.FAILED
            entry = history.for_attempt(job, outcome, reason, retry.exception, now, given_up)
            self._retire(attempt, f"{given_up}: {reason}", entry, now)
            return
        outcome = history.Outcome.TIMED_OUT if timed_out else history.Outcome.RETRY
        entry = history.for_attempt(job, outcome, reason, retry.exception, now)
        if self.store.retry(job, now, run_at, reason, entry):
            log.event(
                "job_retry",
                outcome="retry",
                **job_fields(job),
                next_run_at=run_at.isoformat(),
                error=telling_line(reason, trim=False),
            )
            observers.finished(job, outcome, now)
        else:
            self._lost(job, "retry")

    def _refused_outcome(self, attempt: Attempt, reason: str, now: datetime) -> None:
        """Retire `attempt`'s job for an outcome that cannot be carried out
        (a result the database refused), saying `reason`."""
        entry = history.for_attempt(
            attempt.job, history.Outcome.FAILED, reason, history.OutcomeRefused(reason), now
        )
        self._guarded(self._retire, attempt, reason, entry, now)

    def _retire(self, attempt: Attempt, reason: str, entry: history.Entry, now: datetime) -> None:
        """Retire the job and call `abandon` once (`jobs.retirement.retire`)."""
        if not retirement.retire(self.store, attempt.job, attempt.handler, reason, entry, now):
            self._lost(attempt.job, "retire")

    def _lost(self, job: Job, verb: str) -> None:
        log.event(
            "job_settle_lost",
            logging.WARNING,
            outcome="lost",
            **job_fields(job),
            settle=verb,
            reason="the attempt no longer owns the row",
        )

    def _guarded(self, step: Callable[..., object], attempt: Attempt, *args: object) -> None:
        """Run a settle step, tried again on a transient database error
        (`jobs.runner.settle_tries`); a failure that persists is logged and the
        lease left to expire.

        The row stays `running`, so after its lease another runner takes it
        and the spent attempt is counted: the settle is lost, never the job.
        """
        try:
            self.tries.run(lambda: step(attempt, *args), attempt.job, step.__name__.lstrip("_"))
        except Exception as error:
            settles_failed([attempt.job], error, self.store.using, traced=True)
