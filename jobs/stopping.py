"""A stop request a thread blocked in `select` hears at once.

Its own leaf module, so that the notifiers (whose listeners wait on a socket)
and `jobs.wakeup` (whose `Listener` stops them) can both name it.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Stopping(threading.Event):
    """A stop request that a thread blocked in `select` hears at once: `fileno()`
    turns readable when it is set.

    A listener waits on a socket (PostgreSQL's connection, SQLite's doorbell)
    and would otherwise have to wake every so often to look at a plain
    `threading.Event`; a stopping runner then waited for that tick (0.5 s on
    PostgreSQL). The notifiers select on this beside their own socket instead.
    A socket pair rather than a pipe, since `select` takes sockets everywhere.
    """

    def __init__(self) -> None:
        super().__init__()
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def fileno(self) -> int:
        return self._reader.fileno()

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # already readable (a full buffer), or closed
            self._writer.send(b"\0")

    def clear(self) -> None:
        super().clear()
        with contextlib.suppress(OSError):  # nothing left to read
            while self._reader.recv(64):
                pass

    def close(self) -> None:
        """Release the socket pair, once nobody waits on it."""
        self._reader.close()
        self._writer.close()
