"""The notifier's contract, and the one that carries nothing (MySQL).

A notifier only wakes: a notice says "there is work" or "the config changed"
(`jobs.wakeup.CONFIG_NOTICE`), never which job, so a lost one costs at most a
poll interval and the claim still gives each row to one runner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from jobs.stopping import Stopping


class Notifier:
    """Wakes runners in other processes, for one database alias.

    This base carries nothing: on MySQL a runner finds new work at its next
    poll, at most `poll_interval_ms` later.
    """

    #: Whether runners in other processes can be woken: through the database
    #: (PostgreSQL), or beside it (SQLite's sockets). Where they cannot, they
    #: find new work at their next poll, and a runner starts no listener.
    wakes_other_processes = False

    def __init__(self, using: str) -> None:
        self.using = using

    def notify(self, payload: str = "") -> None:
        """Send `payload` to every listening runner when the current transaction
        commits (never on rollback). A no-op where nothing can carry it."""

    def notices(self, stopping: Stopping, listening: Callable[[str], None]) -> Iterator[str]:
        """Each notice's payload, as it arrives, until `stopping` is set.

        Opens a connection of its own and subscribes it (SQLite: binds a
        socket), then calls `listening(channel)` once, before any payload:
        nothing sent before that was heard. Ends at once when `stopping` is
        set: it waits in a `select` on its socket and on `stopping`. Raises
        Django's `DatabaseError` when the connection fails or is lost; the
        caller (`jobs.wakeup.Listener`) reconnects. Only for notifiers that
        `wakes_other_processes`.
        """
        raise NotImplementedError
