"""How a supervisor's child says it is ready to claim: one byte down a pipe.

The supervisor (`runjobs --processes`) needs to tell a child that failed to
start (an import error, a bad setting: restarting it cannot help) from one
that started and then died of a job it ran (restarting it is the cure). Time
cannot tell them apart: a poison job kills a fresh child within a second.
So each child is given the write end of a pipe of its own (its number in
`READY_FD_ENV`) and writes one byte to it once every lane of it has read the
config, registered and (lane 0) run `recover`, just before its first claim;
then it closes it. A child that exits without having written it failed to start.

Why a pipe: the byte is in the pipe's buffer before the child can claim
anything, so the supervisor, reading it after it has reaped the child,
always knows whether a child that died at once had become ready; a pipe is
private to the two processes (no file to clean up, no name to collide), and
works wherever Python has `pass_fds`. A signal would have to be told apart
from other senders and can be merged with another pending one; a file would
be left behind by a supervisor killed outright. The child's end is kept out
of the processes a handler starts (it is not inheritable), and writing to it
after the supervisor has gone is harmless (EPIPE, ignored).
"""

from __future__ import annotations

import contextlib
import os
import threading

#: Set by the supervisor in each child's environment: the fd to write the byte to.
READY_FD_ENV = "JOBS_READY_FD"

#: What a child writes.
READY = b"R"


class Announcer:
    """A child's side: says "ready" once `lanes` lanes have each said so.

    Without `READY_FD_ENV` (a plain `runjobs`, a test) it does nothing.
    """

    def __init__(self, fd: int | None, lanes: int) -> None:
        self._fd = fd
        self._waiting = lanes
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, lanes: int) -> Announcer:
        """The announcer for this process, taking its fd out of the environment
        (and out of every process it starts)."""
        value = os.environ.pop(READY_FD_ENV, "")
        fd = int(value) if value.isdigit() else None
        if fd is not None:
            try:
                os.set_inheritable(fd, False)
            except OSError:  # not open: started by hand with the variable set
                fd = None
        return cls(fd, lanes)

    def lane_ready(self) -> None:
        """One lane is about to make its first claim; the last one says so.
        Safe from any thread, and to call again (a later `run`)."""
        with self._lock:
            self._waiting -= 1
            if self._waiting != 0 or self._fd is None:
                return
            fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):  # the supervisor has gone: nobody to tell
            os.write(fd, READY)
        with contextlib.suppress(OSError):
            os.close(fd)


class Listener:
    """The supervisor's side for one child: the pipe's read end, and what came down it.

    The read end stays open (and is worth waiting on) until the child has said
    "ready" or closed its end by exiting; `fd` is then None.
    """

    def __init__(self) -> None:
        read_end, child_end = os.pipe()
        os.set_blocking(read_end, False)
        self._child_end: int | None = child_end
        self.fd: int | None = read_end
        self.ready = False

    def child_end(self) -> int:
        """The fd to pass to the child (and to name in `READY_FD_ENV`)."""
        assert self._child_end is not None, "one child per listener"
        return self._child_end

    def spawned(self) -> None:
        """The child has its copy (or was never started): close ours, so the
        pipe ends with the child."""
        if self._child_end is not None:
            with contextlib.suppress(OSError):
                os.close(self._child_end)
            self._child_end = None

    def hear(self) -> bool:
        """Read what the child wrote so far; True once it has said "ready"."""
        if self.fd is None:
            return self.ready
        try:
            said = os.read(self.fd, 16)
        except BlockingIOError:
            return False  # nothing yet, and the child still holds its end
        except OSError:
            said = b""
        self.ready = READY in said
        if self.ready or not said:  # said it, or exited without saying it
            self.close()
        return self.ready

    def close(self) -> None:
        self.spawned()
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
