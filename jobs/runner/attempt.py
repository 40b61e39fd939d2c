"""One claimed row being worked on: what the producer hands on, the executor runs,
the slots count and the completer settles.

Its own module, so that those four can all name it without importing each
other. Attempts are kept by identity (they hash as objects do, in C), never by
job id: a UUID's hash is computed in Python, once per lookup.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobs.config import JobsSettings
from jobs.handlers import JobHandler
from jobs.models import Job
from jobs.store import Claim

if TYPE_CHECKING:
    from jobs.lifecycle import Verdict


def lease_for(budget: timedelta, heartbeat: timedelta | None = None) -> timedelta:
    """The lease written for an attempt with `budget`: slightly longer, so the
    runner's own timeout fires before another runner could take the row; or,
    with heartbeats on, three heartbeats when that is shorter (the runner
    renews it while the attempt runs: `jobs.runner.heartbeat`)."""
    lease = budget + max(timedelta(seconds=1), budget / 20)
    return lease if heartbeat is None else min(lease, RENEWALS_PER_LEASE * heartbeat)


#: A heartbeat lease outlasts this many heartbeats: a renewal missed (a busy
#: database, a row locked for a moment) never costs the attempt its row.
RENEWALS_PER_LEASE = 3


class Attempt:
    """One claimed row being worked on, with what it was claimed under.

    The config snapshot is the one in force at claim: a reload reaches the
    next claim, never an attempt already running.
    """

    def __init__(
        self,
        claim: Claim,
        handler: JobHandler,
        settings: JobsSettings,
        budget: timedelta,
        claimed_at: datetime,
    ) -> None:
        self.job: Job = claim.job
        self.reclaimed = claim.reclaimed
        #: For a reclaimed row, the attempt it was taken from (its record entry
        #: is written before this one runs).
        self.previous = claim.previous
        #: Why the row cannot be handed to its handler (see `Claim.unusable`).
        self.unusable = claim.unusable
        self.handler = handler
        self.settings = settings
        self.budget = budget
        self.deadline = claimed_at + budget
        #: A lifecycle hook's verdict on the row (`Executor.execute`), when one
        #: recognised it: its `Done` then settles on its own, with the hooks'
        #: `after_settle` in the same transaction (`jobs.lifecycle`).
        self.verdict: Verdict | None = None
        self._lock = threading.Lock()
        self._taken = False
        #: Set when the worker's call into the handler has returned, however it
        #: ended: an attempt timed out without it is still holding a thread.
        self.returned = False
        #: Set by the heartbeat when the attempt's lease ran out before a
        #: renewal got through, or its row turned out to be another's: the
        #: runner no longer renews it, and its settle will lose
        #: (`jobs.runner.heartbeat`).
        self.lease_lost = False

    @property
    def taken(self) -> bool:
        """True once someone took the attempt to settle it (`take`): its worker
        with an outcome, or the loop timing it out."""
        return self._taken

    def take(self) -> bool:
        """True for the first caller only: whoever takes the attempt settles it."""
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True

    def lock_if_running(self) -> bool:
        """Take the attempt's lock if nobody has taken it yet (True), so that
        its lease can be renewed before its settle reads it; `unlock` then.

        The renewal locking it never waits on a row lock and waits at most
        `jobs.store.base.RENEW_LOCK_TIMEOUT` for any other (SQLite: its busy
        timeout, for its one write lock), so a settle, which takes the
        attempt first, waits no longer than that and the statement itself."""
        self._lock.acquire()
        if self._taken:
            self._lock.release()
            return False
        return True

    def unlock(self) -> None:
        self._lock.release()
