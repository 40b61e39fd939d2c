"""One child process of the supervisor (`runjobs --processes`): how it is
started (the command line this process was started with, its own process
group, SIGTERM when the supervisor dies, the pipe it says "ready" down) and
what the supervisor knows of it. `jobs.runner.supervisor` decides when.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs.runner.readiness import READY_FD_ENV, Listener
from jobs.runner.restarts import Restart


def shown_status(returncode: int) -> str:
    """An exit code as a number, a death by signal by the signal's name."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return str(returncode)


def command_line() -> list[str]:
    """How to start `manage.py` again: the way this process was started."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:  # python -m django
        return [sys.executable, "-m", spec.name.removesuffix(".__main__")]
    return [sys.executable, str(Path(sys.argv[0]).resolve())]


def die_with_parent() -> Callable[[], None] | None:
    """On Linux, a `preexec_fn` that has the child sent SIGTERM when the supervisor dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def arm() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    return arm


@dataclass
class Child:
    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    #: Where the child says it is ready to claim (`jobs.runner.readiness`).
    listener: Listener | None = None
    #: Whether it has said so: only a child that dies before is a failed start.
    ready: bool = False
    restart_at: float | None = None
    restart: Restart | None = None
    old_pid: int = 0
    old_status: str = ""

    def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        preexec: Callable[[], None] | None,
        started: float,
    ) -> None:
        """Start the process at `started` (monotonic), its ready pipe passed
        to it; OSError if it could not be (out of processes or memory)."""
        self.restart_at, self.started, self.ready = None, started, False
        self.listener = Listener()
        ready_fd = self.listener.child_end()
        try:
            self.process = subprocess.Popen(
                argv,
                env={**env, READY_FD_ENV: str(ready_fd)},
                stdin=subprocess.DEVNULL,
                pass_fds=(ready_fd,),
                process_group=0,  # a terminal's Ctrl-C reaches it through the supervisor only
                preexec_fn=preexec,
            )
        except OSError:
            self.forget()
            raise
        self.listener.spawned()  # the pipe now ends with the child

    def hear(self) -> bool:
        """Read the child's pipe; True the first time it turns out ready."""
        if self.ready or self.listener is None or not self.listener.hear():
            return False
        self.ready = True
        return True

    def listening(self) -> int | None:
        """The fd to wait on for the child's word, while it is worth waiting on."""
        return None if self.listener is None else self.listener.fd

    def forget(self) -> None:
        """The process has gone (or never started): close its pipe."""
        self.process = None
        if self.listener is not None:
            self.listener.close()
            self.listener = None
