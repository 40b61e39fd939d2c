"""The books every fault scenario checks, the figures it records, and small waits.

See the package docstring for the rules `audit` enforces.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from tests import helpers
from tests.conftest import ROOT, RunJobs

ARTIFACTS = ROOT / "tests" / "artifacts"
FIGURES = ARTIFACTS / "faults.json"

#: Log events that say an attempt's settle never landed, so a rerun is expected.
SETTLE_NOT_LANDED = ("job_settle_failed", "job_timed_out", "job_result_discarded")

#: An event line about one attempt: `... LEVEL jobs <event> ... job_id=<id> ... attempt=<n>`.
_EVENT = re.compile(r" jobs (\w+) .*?\bjob_id=(\S+) .*?\battempt=(\d+)")


@dataclass
class Row:
    state: str
    attempts: int
    max_attempts: int
    last_error: str


@dataclass
class Run:
    job_id: uuid.UUID
    attempt: int
    pid: int
    started_at: datetime
    finished_at: datetime | None


@dataclass
class Books:
    """The job rows and the executions recorded against them, read in one go."""

    jobs: dict[uuid.UUID, Row]
    runs: dict[uuid.UUID, list[Run]] = field(default_factory=dict)
    abandoned: dict[uuid.UUID, int] = field(default_factory=dict)


def read_books(cursor: Any, kinds: Iterable[str]) -> Books:
    """The books from a DB-API cursor (the test database's or the private cluster's)."""
    kinds = list(kinds)
    cursor.execute(
        "SELECT id, state, attempts, max_attempts, last_error FROM jobs_job WHERE kind = ANY(%s)",
        [kinds],
    )
    jobs = {_uuid(r[0]): Row(r[1], r[2], r[3], r[4]) for r in cursor.fetchall()}
    cursor.execute(
        "SELECT job_id, attempt, pid, started_at, finished_at FROM jobapp_execution "
        "ORDER BY started_at, attempt"
    )
    runs: dict[uuid.UUID, list[Run]] = defaultdict(list)
    for r in cursor.fetchall():
        runs[_uuid(r[0])].append(Run(_uuid(r[0]), r[1], r[2], r[3], r[4]))
    cursor.execute("SELECT job_id, count(*) FROM jobapp_abandonment GROUP BY job_id")
    abandoned = {_uuid(r[0]): r[1] for r in cursor.fetchall()}
    return Books(jobs, dict(runs), abandoned)


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def settles_not_landed(logs: Iterable[str]) -> set[tuple[uuid.UUID, int]]:
    """(job, attempt) pairs whose settle a runner logged as failed, timed out or discarded."""
    found = set()
    for text in logs:
        for line in text.splitlines():
            match = _EVENT.search(line)
            if match and match.group(1) in SETTLE_NOT_LANDED:
                found.add((uuid.UUID(match.group(2)), int(match.group(3))))
    return found


def count_events(logs: Iterable[str], name: str) -> int:
    return sum(
        1 for text in logs for line in text.splitlines() if re.search(rf" jobs {name}\b", line)
    )


@dataclass
class Audit:
    """What the books say; `problems` lists every broken rule as a sentence."""

    jobs: int
    lost: int
    repeated: int
    unexplained_repeats: int
    problems: list[str]


def audit(
    books: Books,
    expected: set[uuid.UUID],
    *,
    state: str | Callable[[uuid.UUID], str] = "done",
    killed: dict[int, float] | None = None,
    not_landed: set[tuple[uuid.UUID, int]] = frozenset(),  # type: ignore[assignment]
) -> Audit:
    """Check the books for the jobs in `expected`.

    `killed` maps each SIGKILLed pid to the wall-clock time (epoch seconds) of its kill.
    """
    killed = killed or {}
    problems: list[str] = []
    lost = 0
    repeated = unexplained = 0
    missing = expected - books.jobs.keys()
    if missing:
        problems.append(f"{len(missing)} queued jobs have no row any more")
        lost += len(missing)
    for job_id in expected & books.jobs.keys():
        row = books.jobs[job_id]
        want = state(job_id) if callable(state) else state
        if row.state != want:
            lost += 1
            if len(problems) < 20:
                problems.append(f"job {job_id} settled {row.state!r}, not {want!r}")
        runs = books.runs.get(job_id, [])
        attempts = [run.attempt for run in runs]
        if len(set(attempts)) != len(attempts):
            problems.append(f"job {job_id} ran one claim twice: attempts {attempts}")
        if attempts and max(attempts) > row.attempts:
            problems.append(f"job {job_id} ran attempt {max(attempts)} of {row.attempts} claimed")
        if row.state == "done" and runs and max(attempts) != row.attempts:
            problems.append(
                f"job {job_id} is done at attempt {row.attempts} but its last run was "
                f"attempt {max(attempts)}"
            )
        for earlier in runs[:-1]:
            if earlier.finished_at is None:
                if earlier.pid not in killed and (job_id, earlier.attempt) not in not_landed:
                    problems.append(
                        f"job {job_id} attempt {earlier.attempt} never finished, yet its "
                        f"process {earlier.pid} was not killed and its timeout not logged"
                    )
                continue
            repeated += 1
            died_after = (
                earlier.pid in killed and killed[earlier.pid] >= earlier.finished_at.timestamp()
            )
            if not died_after and (job_id, earlier.attempt) not in not_landed:
                unexplained += 1
                if len(problems) < 20:
                    problems.append(
                        f"job {job_id} attempt {earlier.attempt} finished in {earlier.pid} and "
                        "was run again though its settle was never lost"
                    )
    return Audit(len(expected), lost, repeated, unexplained, problems)


def record_figures(scenario: str, **figures: Any) -> None:
    """Merge one scenario's figures into tests/artifacts/faults.json."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        everything = json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        everything = {}
    figures["recorded_at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    everything[scenario] = figures
    FIGURES.write_text(json.dumps(everything, indent=2, sort_keys=True, default=str) + "\n")


#: How often a fault scenario's wait looks again: less often than elsewhere, since
#: what it polls is a database under load, restarting or not up yet.
POLL_SECONDS = 0.1

#: `tests.helpers.wait_until` at the fault suite's pace; called with a message,
#: so it fails the scenario saying what never happened.
wait_until = partial(helpers.wait_until, step=POLL_SECONDS)


def stop(process: RunJobs, timeout: float = 20) -> int | None:
    """SIGTERM `process` and wait for it; its exit status (None if it had to be killed)."""
    if process.process.poll() is not None:
        return process.process.returncode
    os.kill(process.pid, signal.SIGTERM)
    try:
        return process.wait(timeout)
    except Exception:
        process.kill()
        return None


def rss_kib(pid: int, field_name: str = "VmRSS") -> int:
    """A process's resident memory in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {field_name}")
