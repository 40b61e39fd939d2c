"""The `Done` attempts a runner settles together, and the handlers told of them.

A batch is what one settle takes from the completer (`Completer.done_batch`):
the attempts and the rows written for them, in one statement and one commit.
Every batch goes through one entry, `DoneSettles.settle`, whoever settles it:
the producer's pass (with its claim in the same commit), the attempts a
lifecycle hook recognised (a pass's together, before its claim, their hooks
writing in the same transaction: `hooked`), and a runner that has stopped
claiming. Handlers that listen
(`JobHandler.completed`) are told after that commit, one by one, for the rows
the batch won.

A batch's settle that fails on a transient database error is tried again as
a whole (`jobs.runner.settle_tries`). One that still fails, or fails for any
other reason, is no reason for its rows to fail: each is then settled alone
(`DoneSettles.settle_alone`), so a row the database refuses costs only its
own attempt, never the others' (which would each run again after their
leases).
"""

from __future__ import annotations

import collections
import functools
import logging
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections, transaction

from jobs import lifecycle, log, observers
from jobs.models import Job, State
from jobs.presentation import telling_line
from jobs.retirement import job_fields
from jobs.runner.attempt import Attempt
from jobs.runner.settle_tries import GaveUp, SettleTries, settles_failed
from jobs.runner.slots import Slots
from jobs.storable import storable_text
from jobs.store import Claim, Store

#: The pass's settle-and-claim of the given rows (`jobs.store.limits`).
Claiming = Callable[[Sequence[tuple[Job, Any]]], tuple[set[uuid.UUID], list[Claim]]]


@dataclass(slots=True)
class DoneBatch:
    """The `Done` attempts one settle takes, and the rows it writes for them."""

    attempts: list[Attempt] = field(default_factory=list)
    #: Each attempt's job and result, as `Store.settle_and_claim` and
    #: `Store.complete_many` take them.
    rows: list[tuple[Job, Any]] = field(default_factory=list)
    #: Whether a lifecycle hook recognised its attempts: their settle runs the
    #: hooks' `after_settle` in its transaction, so it never joins a claim.
    hooked: bool = False

    def __len__(self) -> int:
        return len(self.attempts)


def tell_completed(
    batch: DoneBatch, listening: list[int], won: set[uuid.UUID], now: datetime
) -> None:
    """Call `completed` on the handler of each attempt at `listening` (indexes
    into `batch`) whose row the settle at `now` won; a hook that raises is
    logged and the others are still told."""
    for index in listening:
        attempt = batch.attempts[index]
        job = attempt.job
        if job.id not in won:
            continue
        job.state, job.result, job.finished_at = State.DONE, batch.rows[index][1], now
        job.lease_expires_at = None
        try:
            attempt.handler.completed(job)
        except Exception as error:
            log.event(
                "job_completed_hook_failed",
                logging.ERROR,
                outcome="failure",
                **job_fields(job),
                error=telling_line(repr(error), trim=False),
                traceback=traceback.format_exc(),
            )


class DoneSettles:
    """The `Done` attempts of one runner (whose slots are `slots`), waiting
    and settled together: the completer's batch half.

    `lost(job, verb)` logs a settle that lost its row; `fail(attempt, reason,
    now)` retires an attempt's job for a result the database refused.
    """

    def __init__(
        self,
        store: Store,
        slots: Slots,
        tries: SettleTries,
        lost: Callable[[Job, str], None],
        fail: Callable[[Attempt, str, datetime], None],
    ) -> None:
        self.store = store
        self.slots = slots
        self.tries = tries
        self.lost = lost
        self.fail = fail
        #: Attempts that ended `Done` with their results, waiting for the
        #: next pass to settle them together: one statement and one commit for
        #: the batch, not one each. Appended by workers, taken by the loop.
        self.done: collections.deque[tuple[Attempt, Any]] = collections.deque()
        #: The same for attempts a lifecycle hook recognised (`Attempt.verdict`):
        #: settled together before the pass's claim, their hooks told in the
        #: settle's transaction (`take_hooked`).
        self.hooked: collections.deque[tuple[Attempt, Any]] = collections.deque()

    def take(self) -> DoneBatch:
        """Take the `Done` attempts waiting, for the producer's settle-and-claim.

        Their slots stay taken until `settled` (or `failed`, `settle_alone`)."""
        batch = DoneBatch()
        done = self.done
        while done:
            attempt, result = done.popleft()
            batch.attempts.append(attempt)
            batch.rows.append((attempt.job, result))
        return batch

    def take_hooked(self) -> DoneBatch:
        """Take the hooked `Done` attempts waiting, in id order: the order their
        settle locks their rows in, as the hooks lock what they touch."""
        batch = DoneBatch(hooked=True)
        hooked = self.hooked
        waiting = []
        while hooked:
            waiting.append(hooked.popleft())
        for attempt, result in sorted(waiting, key=lambda pair: pair[0].job.id):
            batch.attempts.append(attempt)
            batch.rows.append((attempt.job, result))
        return batch

    def settled(self, batch: DoneBatch, won: set[uuid.UUID], now: datetime) -> None:
        """The batch's settle wrote the rows `won` at `now`: free the slots, tell
        the handlers that listen (`JobHandler.completed`), and log each settled
        `Done` and each that lost its row to a newer claim."""
        self.slots.settled(batch.attempts)
        if len(won) == len(batch):  # the usual case: no UUID hashed (in Python) per job
            observers.all_done([attempt.job for attempt in batch.attempts], now)
        else:
            observers.all_done([a.job for a in batch.attempts if a.job.id in won], now)
        listening = [i for i, attempt in enumerate(batch.attempts) if attempt.handler.listens]
        if listening:
            tell_completed(batch, listening, won, now)
        log_done = log.enabled(logging.DEBUG)
        if not log_done and len(won) == len(batch):
            return  # every one won (the ids of a batch are distinct): nothing to say
        for attempt in batch.attempts:
            if attempt.job.id in won:
                if log_done:
                    log.event("job_done", logging.DEBUG, outcome="done", **job_fields(attempt.job))
            else:
                self.lost(attempt.job, "done")
                observers.unsettled(attempt.job)

    def failed(self, batch: DoneBatch, error: Exception) -> None:
        """The batch's rows could not be settled: they stay running until their
        leases expire, and another runner takes them (their attempts are spent)."""
        try:
            for attempt in batch.attempts:
                observers.unsettled(attempt.job)
            jobs = [attempt.job for attempt in batch.attempts]
            settles_failed(jobs, error, self.store.using, traced=False)
        finally:
            self.slots.settled(batch.attempts)

    def settle(
        self, batch: DoneBatch, now: datetime, claim: Claiming | None = None
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        """Settle `batch` at `now`, and with `claim` the pass's claims in the same
        statement and commit; returns the ids won and the claims. The one way a
        `Done` is settled.

        Tried again as a whole on a transient database error. If it still
        fails, each row is settled alone (`settle_alone`) and then, for a
        pass, the claim made with no batch: one row the statement could not
        write costs neither the others nor the claim. A claim that fails with
        no batch to blame raises.
        """
        if not batch:
            return set(), claim([])[1] if claim is not None else []

        def step() -> tuple[set[uuid.UUID], list[Claim]]:
            if claim is None:
                return self.write(batch, batch.rows, now), []
            return claim(batch.rows)

        try:
            won, claims = self.tries.run(step, batch.attempts[0].job, "done", rows=len(batch))
        except Exception as error:
            won = self.settle_alone(batch, error, now)
            return won, claim([])[1] if claim is not None else []
        self.settled(batch, won, now)
        return won, claims

    def write(
        self, batch: DoneBatch, rows: Sequence[tuple[Job, Any]], now: datetime
    ) -> set[uuid.UUID]:
        """Write `rows` of `batch` as settled at `now`: one `complete_many`, with
        the hooks' `after_settle_many` for the rows won in the same transaction
        when the batch is `hooked`. Returns the ids won."""
        if not batch.hooked:
            return self.store.complete_many(rows, now)
        with transaction.atomic(using=self.store.using):
            won = self.store.complete_many(rows, now)
            settled = [job for job, _ in rows if job.id in won]
            if settled:
                lifecycle.after_settle_many(self.store, settled, now, State.DONE)
        return won

    def settle_alone(self, batch: DoneBatch, error: Exception, now: datetime) -> set[uuid.UUID]:
        """The batch's settle failed with `error`: settle each of its rows at
        `now` in a statement and commit of its own, so that one row the
        database refuses costs only its own attempt.

        Each row's settle is tried again on a transient error; once one has
        run out of tries the database is not answering, and it and the rows
        after it are left to their leases (`failed`) rather than each waiting
        out tries of its own on the loop thread. A row refused for good is
        handled by `refused`. The slots are freed either way. Returns the ids won.
        """
        cause = error.error if isinstance(error, GaveUp) else error
        log.event(
            "job_batch_settle_failed",
            logging.WARNING,
            outcome="settling_alone",
            rows=len(batch),
            error=repr(cause),
        )
        if isinstance(cause, DatabaseError):
            connections[self.store.using].close_if_unusable_or_obsolete()
        settled = DoneBatch(hooked=batch.hooked)
        won: set[uuid.UUID] = set()
        for index, (attempt, row) in enumerate(zip(batch.attempts, batch.rows, strict=True)):
            try:
                won |= self.tries.run(
                    functools.partial(self.write, batch, [row], now), attempt.job, "done"
                )
            except GaveUp as gave_up:
                self.failed(DoneBatch(batch.attempts[index:], batch.rows[index:]), gave_up)
                break
            except Exception as refused:
                self.refused(attempt, row[1], refused, now)
                continue
            settled.attempts.append(attempt)
            settled.rows.append(row)
        self.settled(settled, won, now)
        return won

    def refused(self, attempt: Attempt, result: Any, error: Exception, now: datetime) -> None:
        """`attempt`'s `Done` could not be settled on its own, failing with
        `error`. Refused for good by the database, with a result: the database
        refused that result, and the attempt is the job's `Failed`, saying what
        the database said (`jobs.runner.outcomes` refuses what it can foresee
        before it gets here). Otherwise (the database not answering, a bug,
        or no result of the handler's to refuse) the row is left to its lease."""
        if not isinstance(error, DatabaseError) or result is None:
            self.failed(DoneBatch([attempt], [(attempt.job, result)]), error)
            return
        connections[self.store.using].close_if_unusable_or_obsolete()
        reason = storable_text(
            f"{type(attempt.handler).__name__}.run returned a Done whose result "
            f"the database refused: {error}"
        )
        try:
            self.fail(attempt, reason, now)
        finally:
            observers.unsettled(attempt.job)  # a no-op when the retirement was told
            self.slots.settled((attempt,))
