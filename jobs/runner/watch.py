"""The loop's watch over its attempts' time: budgets run out, leases renewed,
and handlers that will not let go of their thread.

- An attempt past its budget is settled as a timed-out retry (`reap`); an
  async one is cancelled, a synchronous one cannot be, and keeps its thread.
- With `heartbeat_seconds` on, a claim's lease is three heartbeats
  (`attempt.lease_for`), and every heartbeat the leases of the attempts this
  runner still runs are renewed in one statement (`renew`), fenced on each
  attempt. A runner that dies stops renewing, and its rows are taken by
  another within three heartbeats; a live runner's long attempt never is.
- A synchronous attempt still running `hard_kill_after` past its budget
  (`hung`) is logged once, as the reason the process leaves: the runner
  stops claiming and its process exits to be replaced, since only the end of
  the process frees that thread and its database connection.

Everything here runs on the loop's thread, between passes and during idle
waits, so a renewal never waits for work to be claimed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from jobs import log
from jobs.config import JobsSettings
from jobs.retirement import job_fields
from jobs.runner.attempt import RENEWALS_PER_LEASE, Attempt
from jobs.runner.completer import Completer
from jobs.runner.slots import Slots
from jobs.store import Store


class Watch:
    """One runner's watch over the attempts in its `slots`."""

    def __init__(self, store: Store, slots: Slots, completer: Completer) -> None:
        self.store = store
        self.slots = slots
        self.completer = completer
        self._renewed_at: datetime | None = None
        #: Attempts timed out while their handler still ran, until it returns.
        self._overdue: list[Attempt] = []
        #: The attempt that made this runner give up, once one has.
        self.hung_attempt: Attempt | None = None

    def reap(self, now: datetime) -> None:
        """Time out the attempts past their budget (the completer settles them)."""
        for attempt in self.slots.in_flight():
            if attempt.deadline <= now and self.completer.time_out(attempt, now):
                self._overdue.append(attempt)

    def renew(
        self, now: datetime, settings: JobsSettings, limited: Callable[[], frozenset[str]]
    ) -> None:
        """Renew the leases of the attempts still running, if a heartbeat is due.

        Each attempt is held (`Attempt.hold_if_running`) across the statement,
        so its settle, which is fenced on the lease, reads the lease renewed
        or waits for it; one already being settled is left out.
        """
        heartbeat = settings.heartbeat
        if heartbeat is None:
            return
        if self._renewed_at is None or now - self._renewed_at < heartbeat:
            self._renewed_at = self._renewed_at or now  # the claims wrote fresh leases
            return
        self._renewed_at = now
        held = [attempt for attempt in self.slots.in_flight() if attempt.hold_if_running()]
        if not held:
            return
        until = now + RENEWALS_PER_LEASE * heartbeat
        try:
            jobs = [attempt.job for attempt in held]
            kinds = limited()
            counted = [job.id for job in jobs if job.kind in kinds]
            self.store.renew(jobs, until, counted)
            for job in jobs:
                job.lease_expires_at = until
        except Exception as error:
            log.event("runner_renew_failed", logging.ERROR, outcome="failure", error=repr(error))
        finally:
            for attempt in held:
                attempt.let_go_of()

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
        next attempt's deadline, the next renewal, or the next hard limit."""
        wait = settings.poll_interval
        in_flight = self.slots.in_flight()
        for attempt in in_flight:
            wait = min(wait, attempt.deadline - now)
        heartbeat = settings.heartbeat
        if in_flight and heartbeat is not None and self._renewed_at is not None:
            wait = min(wait, self._renewed_at + heartbeat - now)
        for attempt in self._overdue:
            after = timedelta(seconds=attempt.settings.hard_kill_after)
            if after:
                wait = min(wait, attempt.deadline + after - now)
        return max(wait, timedelta(0)).total_seconds()
