"""Recycling a runner process (`runjobs --max-jobs-per-process N`,
`--max-memory-per-process MB`), as Celery's `max_tasks_per_child` and
`max_memory_per_child` do: memory a handler leaks, or a library's caches,
go with the process instead of growing it for ever.

Grain: the process, whatever its lanes. After each attempt's settle (the
`job_finished` signal, on the thread that settled it) the process's attempts
are counted and its resident memory read; once either is over its bound the
process stops claiming (`on_due`), lets the attempts it holds finish within
`--grace` as on SIGTERM, and exits `EXIT_RECYCLED`, which a supervisor
restarts at once and a process manager restarts as any non-zero exit. So a
process runs its N attempts, plus those counted in the same batch settle as
the Nth and those it holds then: at most N + 2 x `max_concurrent`. An
attempt whose settle lost its row is not counted (the signal does not
fire): it never ran to an outcome of this process's.

The cost, only when an option is given: one receiver call per settled
attempt, and for the memory bound one `pread` of /proc/self/statm (a few
microseconds). Without either option nothing is connected.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
from collections.abc import Callable
from typing import Any

from jobs import log, signals

MIB = 1024 * 1024


class MemoryGauge:
    """This process's resident memory, in MiB: from /proc/self/statm where
    there is one (the current size, read through an fd kept open), else the
    peak that `getrusage` reports (all some systems offer)."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        try:
            self._statm: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self._statm = None

    def mib(self) -> float:
        if self._statm is not None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(os.pread(self._statm, 128, 0).split()[1]) * self._page / MIB
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / MIB if sys.platform == "darwin" else peak / 1024  # bytes on macOS, else KiB

    def close(self) -> None:
        if self._statm is not None:
            with contextlib.suppress(OSError):
                os.close(self._statm)
            self._statm = None


class Recycling:
    """Counts this process's settled attempts and watches its memory; calls
    `on_due` once, from the settling thread, when a bound is passed."""

    def __init__(
        self, max_jobs: int | None, max_memory_mb: int | None, on_due: Callable[[], None]
    ) -> None:
        self.max_jobs, self.max_memory_mb = max_jobs, max_memory_mb
        self.on_due = on_due
        self.attempts = 0
        #: Why the process is being recycled, once it is; None until then.
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._gauge = MemoryGauge() if max_memory_mb is not None else None

    @property
    def enabled(self) -> bool:
        return self.max_jobs is not None or self.max_memory_mb is not None

    def connect(self) -> None:
        """Start counting (nothing without a bound)."""
        if self.enabled:
            signals.job_finished.connect(self._ended, weak=False, dispatch_uid=self._uid)

    def close(self) -> None:
        if self.enabled:
            signals.job_finished.disconnect(dispatch_uid=self._uid)
        if self._gauge is not None:
            self._gauge.close()

    @property
    def _uid(self) -> str:
        return f"jobs.runner.recycling:{id(self)}"

    def _ended(self, sender: Any = None, **kwargs: Any) -> None:
        """The `job_finished` receiver: one more attempt ran here."""
        rss = None if self._gauge is None else self._gauge.mib()
        with self._lock:
            self.attempts += 1
            if self.reason is not None:
                return
            self.reason = self._over(rss)
            if self.reason is None:
                return
        log.event(
            "runner_recycled",
            outcome="exiting",
            reason=self.reason,
            attempts=self.attempts,
            rss_mb="-" if rss is None else round(rss, 1),
        )
        self.on_due()

    def _over(self, rss: float | None) -> str | None:
        """Why a bound is passed now, or None."""
        if self.max_jobs is not None and self.attempts >= self.max_jobs:
            return f"ran {self.attempts} attempts (--max-jobs-per-process {self.max_jobs})"
        if rss is not None and self.max_memory_mb is not None and rss > self.max_memory_mb:
            return (
                f"resident memory {rss:.0f} MB after an attempt "
                f"(--max-memory-per-process {self.max_memory_mb})"
            )
        return None
