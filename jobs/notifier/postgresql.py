"""PostgreSQL: LISTEN/NOTIFY on the wake-up channel.

A notice rides the notifying transaction, so it goes out when (and only if)
that transaction commits. The two statements are the store's
(`jobs.store.postgresql.channel`: vendor SQL stays in `jobs.store`); here is
the listening connection of a runner's own and its wait.
"""

from __future__ import annotations

import selectors
from collections.abc import Callable, Iterator

import psycopg
from django.db import DatabaseError, connections

from jobs.notifier.base import Notifier
from jobs.stopping import Stopping
from jobs.store.postgresql import channel


class PostgreSQLNotifier(Notifier):
    wakes_other_processes = True

    def notify(self, payload: str = "") -> None:
        channel.notify(connections[self.using], payload)

    def notices(self, stopping: Stopping, listening: Callable[[str], None]) -> Iterator[str]:
        """Waits in a `select` on the listening connection's socket and on
        `stopping`, then reads whatever arrived without blocking.

        psycopg's `notifies(timeout=...)` blocks in the driver, where nothing
        but its timeout ends the wait, so a stopping runner waited for that
        tick; closing the connection from another thread does not wake a
        `poll` on its socket either. A notice or a lost connection makes the
        socket readable, so the drain that follows yields it or raises.
        """
        params = channel.listener_params(connections[self.using])
        try:
            with (
                psycopg.connect(**params, autocommit=True) as listener,
                selectors.DefaultSelector() as ready,
            ):
                listening(channel.listen(listener))
                ready.register(listener.fileno(), selectors.EVENT_READ)
                ready.register(stopping, selectors.EVENT_READ)
                while not stopping.is_set():
                    # Drain first: notices that came with the LISTEN's answer
                    # are already read, and a select would not see them.
                    for notice in listener.notifies(timeout=0):
                        yield notice.payload
                    ready.select()
        except psycopg.Error as error:
            raise DatabaseError(str(error)) from error
