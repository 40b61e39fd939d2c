"""The runner's heartbeat: a thread of its own that reads the database's clock
and renews the leases of the attempts still running.

With `heartbeat_seconds` on, a claim's lease is three heartbeats
(`attempt.lease_for`), and every heartbeat renews the leases of the attempts
this runner still runs, fenced on each attempt. A runner that dies stops
renewing, and its rows are taken by another within three heartbeats; a live
runner's long attempt never is. Every beat (every `heartbeat_seconds`, or
every `RunnerProcess.HEARTBEAT` with heartbeats off) also measures the
database's clock (`jobs.clock`), by which the whole runner tells time,
and writes the process's per-minute counts (`jobs.metrics.minutes`), last
once more as the thread ends, so a stopping runner's last jobs are charted.

Its own thread and its own database connection, so nothing else can hold a
renewal up: a loop blocked on a settle, a slow pass or a busy worker pool
used to delay it, and one renewal blocked on one locked row (an operator's
cancel, a `SELECT ... FOR UPDATE` in the project's code) froze the leases of
every attempt of the runner until another runner took them all. A renewal
now skips a row another session has locked (`Store.renew`), logs it
(`job_renewal_skipped`) and tries again next beat, and waits for any other
lock at most `RENEW_LOCK_TIMEOUT`.

An attempt whose lease ran out before a renewal got through, or whose row a
renewal finds is no longer its own (cancelled, or taken by another runner),
is given up (`job_lease_lost`): never renewed again, since another runner
may be running it by now. Its handler is told nothing and runs on (a thread
cannot be stopped); whatever it returns is refused by its settle, which is
fenced on the attempt (`job_settle_lost`), and its `abandon` is not called
by this runner: the row is another attempt's to settle.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.db import DatabaseError, connections

from jobs import log
from jobs.clock import DatabaseClock
from jobs.config import JobsSettings
from jobs.metrics.minutes import minutes
from jobs.metrics.tally import flush_failed, tally
from jobs.models import Job, RunnerProcess
from jobs.retirement import job_fields
from jobs.runner.attempt import RENEWALS_PER_LEASE, Attempt
from jobs.runner.pool import forget_queries
from jobs.runner.slots import Slots
from jobs.store import Renewal, Store

#: How long `stop` waits for a beat under way to end.
STOP_SECONDS = 5.0


class Heartbeat:
    """One runner's heartbeat over the attempts in its `slots`.

    `clock` is the runner's: measured at `start` and every beat when it is
    a `DatabaseClock` (never when the runner was given a clock of its own,
    as tests give one). `settings` and `limited` are read each beat: the
    config in force and the kinds under a concurrency limit, whose counted
    attempts are renewed with theirs.
    """

    def __init__(
        self,
        store: Store,
        slots: Slots,
        clock: Callable[[], datetime],
        settings: Callable[[], JobsSettings],
        limited: Callable[[], frozenset[str]],
    ) -> None:
        self.store = store
        self.slots = slots
        self.clock = clock
        self.settings = settings
        self.limited = limited
        self.database_clock = clock if isinstance(clock, DatabaseClock) else None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread --------------------------------------------------------------

    def start(self) -> None:
        """Measure the clock (on the caller's thread: the runner claims nothing
        before its clock is read), then beat on a thread of its own."""
        if self._thread is None:
            self._measured()
            self._thread = threading.Thread(
                target=self._beat_on, name="jobs-heartbeat", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """End the thread (after the beat under way, if any) and its connection."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(STOP_SECONDS)

    def _beat_on(self) -> None:
        try:
            while not self._stopping.wait(self.interval()):
                try:
                    self.beat()
                except Exception as error:  # a bug: the next beat must still come
                    log.event(
                        "runner_heartbeat_failed",
                        logging.ERROR,
                        outcome="failure",
                        error=repr(error),
                        traceback=traceback.format_exc(),
                    )
        finally:
            tally.flush()  # what the runner's last settles noted
            self.save_minutes()
            connections.close_all()  # this thread's own

    def interval(self) -> float:
        """Seconds to the next beat: a heartbeat, or with heartbeats off the
        presence row's (the clock is still measured)."""
        heartbeat = self.settings().heartbeat
        return (heartbeat or RunnerProcess.HEARTBEAT).total_seconds()

    # -- one beat ----------------------------------------------------------------

    def beat(self) -> None:
        """Measure the database's clock, then renew what is due."""
        forget_queries()
        self._measured()
        heartbeat = self.settings().heartbeat
        if heartbeat is not None:
            self.renew(self.clock(), heartbeat)
        self.save_minutes()

    def save_minutes(self) -> None:
        """Write the per-minute counts; a failure is logged, and the counts
        kept for the next beat."""
        try:
            minutes.save(self.store.using, self.clock())
        except Exception as error:
            flush_failed(error)
            self._after(error)

    def _measured(self) -> None:
        """Read the database's clock, where this runner tells time by it; a
        failure is logged, and the last reading kept until the next beat."""
        if self.database_clock is None:
            return
        try:
            self.database_clock.measure(self.store.database_now)
        except Exception as error:
            log.event("runner_clock_unread", logging.WARNING, outcome="failure", error=repr(error))
            self._after(error)

    def renew(self, now: datetime, heartbeat: timedelta) -> None:
        """Renew the leases of the attempts still running (and still this
        runner's) to three heartbeats from `now`.

        Each attempt is held (`Attempt.lock_if_running`) across the statement,
        so its settle, which is fenced on the lease, reads the lease renewed
        or waits for it; one already being settled is left out.
        """
        held: list[Attempt] = []
        for attempt in _current(self.slots.in_flight()):
            if not attempt.lock_if_running():
                continue
            lease = attempt.job.lease_expires_at
            if lease is None or lease <= now:
                _lost(attempt, "its lease ran out before a renewal got through")
                attempt.unlock()
            else:
                held.append(attempt)
        if not held:
            return
        try:
            until = now + RENEWALS_PER_LEASE * heartbeat
            renewal = self._renewal([attempt.job for attempt in held], until)
            if renewal is not None:
                self._apply(held, renewal, until)
        finally:
            for attempt in held:
                attempt.unlock()

    def _renewal(self, jobs: list[Job], until: datetime) -> Renewal | None:
        kinds = self.limited()
        try:
            return self.store.renew(jobs, until, [job.id for job in jobs if job.kind in kinds])
        except Exception as error:
            log.event(
                "runner_renew_failed",
                logging.ERROR,
                outcome="failure",
                error=repr(error),
                running=len(jobs),
                reason="no lease was renewed; each is tried again at the next heartbeat",
            )
            self._after(error)
            return None

    def _apply(self, held: list[Attempt], renewal: Renewal, until: datetime) -> None:
        for attempt in held:
            job = attempt.job
            if job.id in renewal.renewed:
                job.lease_expires_at = until
            elif job.id in renewal.held:
                log.event(
                    "job_renewal_skipped",
                    logging.WARNING,
                    outcome="skipped",
                    **job_fields(job),
                    lease_expires_at=job.lease_expires_at.isoformat()
                    if job.lease_expires_at
                    else "",
                    reason="another session holds a lock on its row; tried again at the "
                    "next heartbeat",
                )
            else:
                _lost(attempt, "its row is no longer this attempt's: cancelled, or taken")

    def _after(self, error: Exception) -> None:
        if isinstance(error, DatabaseError):
            connections[self.store.using].close_if_unusable_or_obsolete()


def _current(attempts: Iterable[Attempt]) -> list[Attempt]:
    """The attempts still this runner's to renew: not given up, and of two
    attempts of one job (a row this runner took back after its own attempt's
    lease ran out), the later; the earlier is given up."""
    latest: dict[object, Attempt] = {}
    for attempt in attempts:
        if attempt.lease_lost:
            continue
        other = latest.get(attempt.job.id)
        if other is not None:
            older, attempt = sorted((other, attempt), key=lambda a: a.job.attempts)
            _lost(older, "its row was claimed again for a later attempt")
        latest[attempt.job.id] = attempt
    return list(latest.values())


def _lost(attempt: Attempt, reason: str) -> None:
    """Give `attempt` up: logged once, never renewed again (see the module's
    docstring for what its handler is told)."""
    attempt.lease_lost = True
    log.event(
        "job_lease_lost",
        logging.ERROR,
        outcome="lost",
        **job_fields(attempt.job),
        lease_expires_at=attempt.job.lease_expires_at.isoformat()
        if attempt.job.lease_expires_at
        else "",
        reason=f"{reason}: another runner may run it now; this runner renews it no "
        "more, its handler runs on, and its settle will be refused",
    )
