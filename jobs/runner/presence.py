"""A runner's presence: a `RunnerProcess` row, heartbeated while it lives.

The admin reads these rows to show who is running what, and which kinds no
live runner handles. A runner that dies stops beating and is shown as gone;
rows gone for over a day are cleared by the next runner that starts. Each
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

#: Rows of runners silent this long are deleted when another runner starts.
FORGET_AFTER = timedelta(days=1)


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
        #: The name the runners page shows, which its claims write on their
        #: rows (`Job.claimed_by`): known before the row is written.
        self.name = runner_name(socket.gethostname(), os.getpid(), lane, lanes)

    def register(
        self, kinds: list[str], max_concurrent: int, queues: Sequence[str] | None = None
    ) -> None:
        now = self.clock()
        rows = RunnerProcess.objects.using(self.using)
        rows.filter(heartbeat_at__lt=now - FORGET_AFTER).delete()
        self.row = rows.create(
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


def supervisor_pid() -> int | None:
    """The pid of the supervisor that started this process, if one did."""
    value = os.environ.get(SUPERVISOR_PID_ENV, "")
    return int(value) if value.isdigit() else None
