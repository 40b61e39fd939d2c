"""SQLite: rings each runner's socket in the database file's doorbell directory
(`sqlite_doorbell`), after the commit; no SQL, no connection."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from django.db import connections

from jobs.notifier import sqlite_doorbell
from jobs.notifier.base import Notifier
from jobs.stopping import Stopping


class SQLiteNotifier(Notifier):
    #: Through the doorbell directory, not the database: see `sqlite_doorbell`.
    wakes_other_processes = True

    def notify(self, payload: str = "") -> None:
        """Rings once per payload per transaction, however often asked
        (`sqlite_doorbell.ring_on_commit`); an in-memory database rings nothing."""
        directory = self._place()
        if directory is not None:
            sqlite_doorbell.ring_on_commit(directory, payload, self.using)

    def notices(self, stopping: Stopping, listening: Callable[[str], None]) -> Iterator[str]:
        """Binds a socket of this runner's instead of a connection; never raises
        `DatabaseError`: a runner that cannot listen logs it once and polls."""
        return sqlite_doorbell.listen(self._place(), stopping, listening)

    def _place(self) -> str | None:
        return sqlite_doorbell.place(connections[self.using].settings_dict["NAME"])
