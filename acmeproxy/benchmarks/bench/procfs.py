"""What /proc says about processes while a part runs: the database server's
CPU and a runner's resident memory. Empty figures where there is no /proc.

Sampled on a thread rather than read once at the end, because a runner's
database backends exit with it and take their counters along.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


class DatabaseCPU:
    """CPU seconds spent by local PostgreSQL processes while the block runs.

    Sampled from /proc on a thread, since a runner's backends exit with it and
    take their counters along; a backend first seen mid-run counts from zero.
    """

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def __enter__(self) -> DatabaseCPU:
        self.first = _postgres_processes()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample_until_stopped(self) -> None:
        while True:
            self.last.update(_postgres_processes())
            if self._stop.wait(0.1):
                return

    @property
    def seconds(self) -> float:
        return sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())


class ResidentMemory:
    """A process's resident set size, sampled from /proc on a thread until it exits.

    Peak RSS alone cannot tell a runner that grows with every job from one
    that reached its size early: the peak over the first quarter of the run
    against the peak over all of it can. Empty where /proc is not there.
    """

    def __init__(self, pid: int) -> None:
        self.samples: list[float] = []
        self._status = Path(f"/proc/{pid}/status")
        self._thread = threading.Thread(target=self._sample_until_gone, daemon=True)
        self._thread.start()

    def _sample_until_gone(self) -> None:
        while True:
            try:
                status = self._status.read_text()
            except OSError:
                return  # exited (or no /proc)
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    self.samples.append(int(line.split()[1]) / 1024)
            time.sleep(0.1)

    def peak(self, until: float = 1.0) -> float | None:
        """The largest sample in the first `until` of the run (1.0: all of it), in MB."""
        self._thread.join()
        if not self.samples:
            return None
        return round(max(self.samples[: max(1, int(len(self.samples) * until))]), 1)


def _postgres_processes() -> dict[int, float]:
    """CPU seconds so far of every process named postgres, by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")].startswith("postgres"):
            fields = stat[stat.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    return found
