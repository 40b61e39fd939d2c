"""The ledger: what the fault suite's ledger handlers ran, kept outside the database.

A scenario that crashes PostgreSQL cannot check its books against rows in that
database: the crash may forget them along with the commits under test, and a
handler that wrote one would flush the WAL (a commit that waits for the flush
makes every earlier one durable), closing the very window the scenario means
to hit. So each handler of `tests.faults.jobs` appends two lines to a file of
its own process in the directory `$FAULTS_LEDGER`, one as the attempt starts
and one as it ends:

    start <run> <job id> <attempt> <lease> <epoch seconds> <key>
    end <run> <epoch seconds>

`<run>` names one execution (process id and a counter), since after a crash
one process may run the same job with the same attempt number twice; `<lease>`
is the end of the lease its claim wrote, the other half of a settle's fence.
A line is one `write` on a file opened with O_APPEND, so lines from the
process's worker threads never interleave, and nothing is lost when the
database (not this process) dies. No Django here: `read_ledger` runs in the
test process, `started`/`ended` in the runner's.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The environment variable naming the directory the ledger files go to.
LEDGER_ENV = "FAULTS_LEDGER"


@dataclass(frozen=True)
class LedgerRun:
    """One execution of a handler, as its ledger lines tell it."""

    job_id: uuid.UUID
    key: str
    attempt: int
    #: The end of the lease its claim wrote (ISO 8601), as the handler saw it.
    lease: str
    pid: int
    started: float
    #: None when the handler never reached its end (its process died).
    finished: float | None


class _Writer:
    """This process's ledger file, opened at the first line."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._runs = itertools.count(1)

    def started(self, job: Any) -> str:
        run = f"{os.getpid()}-{next(self._runs)}"
        lease = job.lease_expires_at.isoformat() if job.lease_expires_at else "-"
        self._write(f"start {run} {job.id} {job.attempts} {lease} {time.time():.6f} {job.key}\n")
        return run

    def ended(self, run: str) -> None:
        self._write(f"end {run} {time.time():.6f}\n")

    def _write(self, line: str) -> None:
        with self._lock:
            if self._fd is None:
                path = Path(os.environ[LEDGER_ENV]) / f"ledger-{os.getpid()}.txt"
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line.encode())


_writer = _Writer()

#: Record that an attempt of `job` starts; the run's name, for `ended`.
started = _writer.started
#: Record that the run named `run` reached its end.
ended = _writer.ended


def parse_ledger(lines: Iterable[str]) -> list[LedgerRun]:
    """The runs that ledger lines (of any number of processes) record, in start order."""
    starts: dict[str, list[str]] = {}
    ends: dict[str, float] = {}
    for line in lines:
        fields = line.rstrip("\n").split(" ", 6)
        if fields[0] == "start" and len(fields) == 7:
            starts[fields[1]] = fields
        elif fields[0] == "end" and len(fields) == 3:
            ends[fields[1]] = float(fields[2])
        elif line.strip():
            raise ValueError(f"not a ledger line: {line!r}")
    strays = ends.keys() - starts.keys()
    if strays:
        raise ValueError(f"ledger runs that end without a start: {sorted(strays)}")
    runs = [
        LedgerRun(
            job_id=uuid.UUID(job_id),
            key=key,
            attempt=int(attempt),
            lease=lease,
            pid=int(run.split("-")[0]),
            started=float(at),
            finished=ends.get(run),
        )
        for run, (_, _, job_id, attempt, lease, at, key) in starts.items()
    ]
    return sorted(runs, key=lambda r: r.started)


def read_ledger(directory: Path) -> list[LedgerRun]:
    """Every run recorded in `directory`'s ledger files."""
    lines: list[str] = []
    for path in sorted(directory.glob("ledger-*.txt")):
        lines.extend(path.read_text().splitlines())
    return parse_ledger(lines)
