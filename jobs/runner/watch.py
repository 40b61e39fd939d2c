"""The loop's watch over its attempts' time: budgets run out, and handlers
that will not let go of their thread.

- An attempt past its budget is settled as a timed-out retry (`reap`); an
  async one is cancelled, a synchronous one cannot be, and keeps its thread.
- A synchronous attempt still running `hard_kill_after` past its budget
  (`hung`) is logged once, as the reason the process leaves: the runner
  stops claiming and its process exits to be replaced, since only the end of
  the process frees that thread and its database connection.

Everything here runs on the loop's thread, between passes and during idle
waits. Leases are renewed elsewhere, on a thread of their own
(`jobs.runner.heartbeat`), so neither waits for the other.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from jobs import log
from jobs.config import JobsSettings
from jobs.retirement import job_fields
from jobs.runner.attempt import Attempt
from jobs.runner.completer import Completer
from jobs.runner.slots import Slots
from jobs.store import Store


class Watch:
    """One runner's watch over the attempts in its `slots`."""

    def __init__(self, store: Store, slots: Slots, completer: Completer) -> None:
        self.store = store
        self.slots = slots
        self.completer = completer
        #: Attempts timed out while their handler still ran, until it returns.
        self._overdue: list[Attempt] = []
        #: The attempt that made this runner give up, once one has.
        self.hung_attempt: Attempt | None = None

    def reap(self, now: datetime) -> list[Attempt]:
        """Time out the attempts past their budget (the completer settles them);
        those it timed out."""
        reaped = [
            attempt
            for attempt in self.slots.in_flight()
            if attempt.deadline <= now and self.completer.time_out(attempt, now)
        ]
        self._overdue += reaped
        return reaped

    def hung(self, now: datetime) -> bool:
        """Whether a timed-out synchronous attempt has kept its thread for
        `hard_kill_after` past its budget (logged, once, as the reason)."""
        if self.hung_attempt is not None:
            return True
        if not self._overdue:
            return False
        self._overdue = [attempt for attempt in self._overdue if not attempt.returned]
        for attempt in self._overdue:
            after = attempt.settings.hard_kill_after
            if after and attempt.deadline + timedelta(seconds=after) <= now:
                self.hung_attempt = attempt
                log.event(
                    "runner_hard_limit",
                    logging.ERROR,
                    outcome="exiting",
                    **job_fields(attempt.job),
                    budget=attempt.budget,
                    hard_kill_after=after,
                    reason="the handler still runs past its budget and hard_kill_after, holding "
                    "a thread and a connection: this process stops claiming, finishes or hands "
                    "back its other attempts, and exits to be replaced",
                )
                return True
        return False

    def wait_seconds(self, now: datetime, settings: JobsSettings) -> float:
        """How long the loop may sleep: no longer than the poll interval, the
        next attempt's deadline, or the next hard limit."""
        wait = settings.poll_interval
        for attempt in self.slots.in_flight():
            wait = min(wait, attempt.deadline - now)
        for attempt in self._overdue:
            after = timedelta(seconds=attempt.settings.hard_kill_after)
            if after:
                wait = min(wait, attempt.deadline + after - now)
        return max(wait, timedelta(0)).total_seconds()
