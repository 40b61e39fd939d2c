"""A runner's presence: a `RunnerProcess` row, heartbeated while it lives.

The admin reads these rows to show who is running what, and which kinds no
live runner handles. A runner that dies stops beating and is shown as gone
once it has missed `RunnerProcess.MISSED_BEATS` beats (`STALE_AFTER`); its
row is deleted `RunnerProcess.FORGET_AFTER` after its last beat, by any live
runner (at its start, then at most once every `FORGET_EVERY` of its beats).
`last_heard` tells a reclaim when a vanished runner last beat. Each
beat also writes how far the database's clock was from the runner's at its
last reading (`jobs.clock`), which the runners page shows when it is large.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobs import __version__
from jobs.clock import DatabaseClock
from jobs.models import RunnerProcess, runner_name

#: Set by `runjobs --processes` in each child's environment (see
#: `jobs.runner.process`): the supervisor's pid, shown on the runners page.
SUPERVISOR_PID_ENV = "JOBS_SUPERVISOR_PID"

#: Seconds between a runner's reports of itself (`RunnerProcess.HEARTBEAT`):
#: a wait longer than this beats first.
BEAT = RunnerProcess.HEARTBEAT.total_seconds()
#: Rows of runners silent this long are deleted by the live ones.
FORGET_AFTER = RunnerProcess.FORGET_AFTER
#: How often a live runner deletes the rows of runners gone past `FORGET_AFTER`.
FORGET_EVERY = timedelta(minutes=1)


class Presence:
    """One row per lane: a process running `runjobs --lanes 2` shows as two
    rows with its host and pid, each with its own slots and running count."""

    def __init__(
        self, using: str, clock: Callable[[], datetime], lane: int = 0, lanes: int = 1
    ) -> None:
        self.using = using
        self.clock = clock
        self.lane, self.lanes = lane, lanes
        self.row: RunnerProcess | None = None
        #: When this runner last deleted the rows of long-gone runners.
        self.forgot_at: datetime | None = None
        #: The name the runners page shows, which its claims write on their
        #: rows (`Job.claimed_by`): known before the row is written.
        self.name = runner_name(socket.gethostname(), os.getpid(), lane, lanes)

    def register(
        self, kinds: list[str], max_concurrent: int, queues: Sequence[str] | None = None
    ) -> None:
        now = self.clock()
        self.forget_gone(now)
        self.row = RunnerProcess.objects.using(self.using).create(
            hostname=socket.gethostname(),
            pid=os.getpid(),
            version=__version__,
            started_at=now,
            heartbeat_at=now,
            max_concurrent=max_concurrent,
            running=0,
            kinds=kinds,
            queues=list(queues) if queues else None,
            lane=self.lane,
            lanes=self.lanes,
            supervisor_pid=supervisor_pid(),
            clock_offset_ms=self.clock_offset_ms(),
        )

    def beat(self, running: int, max_concurrent: int, *, force: bool = False) -> None:
        """Report in, if a heartbeat is due (or `force`), or the runner's clock
        went back since the last (corrected by the database's, `jobs.clock`:
        a runner a minute ahead registers a minute early, and would otherwise
        stay silent, and shown as gone, until its time caught up)."""
        if self.row is None:
            return
        now = self.clock()
        since = now - self.row.heartbeat_at
        if not force and timedelta(0) <= since < RunnerProcess.HEARTBEAT:
            return
        offset = self.clock_offset_ms()
        self.row.heartbeat_at, self.row.running = now, running
        self.row.max_concurrent, self.row.clock_offset_ms = max_concurrent, offset
        updated = RunnerProcess.objects.using(self.using).filter(pk=self.row.pk)
        if not updated.update(
            heartbeat_at=now, running=running, max_concurrent=max_concurrent, clock_offset_ms=offset
        ):
            # Forgotten (a long pause, or deleted by hand): register again.
            self.row.save(using=self.using, force_insert=True)
        if self.forgot_at is None or not timedelta(0) <= now - self.forgot_at < FORGET_EVERY:
            self.forget_gone(now)

    def forget_gone(self, now: datetime) -> None:
        """Delete the rows of runners silent for `FORGET_AFTER` (never this
        one's: it beats); one statement, at most once every `FORGET_EVERY`."""
        self.forgot_at = now
        RunnerProcess.objects.using(self.using).filter(heartbeat_at__lt=now - FORGET_AFTER).delete()

    def clock_offset_ms(self) -> int | None:
        """The database clock's lead over the runner's at its last reading, in
        ms; None where the runner's clock is not the database's (SQLite, or a
        clock given to the runner) or was not read yet."""
        clock = self.clock
        return clock.offset_ms() if isinstance(clock, DatabaseClock) else None

    def remove(self) -> None:
        if self.row is not None:
            RunnerProcess.objects.using(self.using).filter(pk=self.row.pk).delete()
            self.row = None


def last_heard(using: str, name: str | None) -> datetime | None:
    """When the runner named `name` (as `Job.claimed_by` holds it) last beat,
    or None once its row is forgotten (or for no name). For a reclaim: rare,
    so one more read of the few runner rows is nothing."""
    if not name:
        return None
    hostname = name.partition(":")[0]
    for row in RunnerProcess.objects.using(using).filter(hostname=hostname):
        if row.name == name:
            return row.heartbeat_at
    return None


def supervisor_pid() -> int | None:
    """The pid of the supervisor that started this process, if one did."""
    value = os.environ.get(SUPERVISOR_PID_ENV, "")
    return int(value) if value.isdigit() else None
