"""The books every fault scenario checks, the figures it records, and small waits.

See the package docstring for the rules `audit` enforces, and for those of
`audit_crash`, which holds the rows to the ledger (`tests.faults.ledger`)
after a PostgreSQL crash.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from tests import helpers
from tests.conftest import ROOT, RunJobs
from tests.faults.ledger import LedgerRun

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

    @property
    def stuck(self) -> int:
        """Rows still `running` when the scenario's runners have stopped."""
        return sum(row.state == "running" for row in self.jobs.values())


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


def attempts_retried(logs: Iterable[str]) -> set[tuple[uuid.UUID, int]]:
    """(job, attempt) pairs a runner settled as a retry: for an execution that
    never recorded its end because the handler's own write failed (the
    database was restarting) and the attempt ended in that error."""
    found = set()
    for text in logs:
        for line in text.splitlines():
            match = _EVENT.search(line)
            if match and match.group(1) == "job_retry":
                found.add((uuid.UUID(match.group(2)), int(match.group(3))))
    return found


def count_events(logs: Iterable[str], name: str) -> int:
    return sum(
        1 for text in logs for line in text.splitlines() if re.search(rf" jobs {name}\b", line)
    )


def ran_twice_at_once(books: Books, shift: Mapping[int, timedelta] | None = None) -> int:
    """How many jobs had two executions running at the same time (concurrent
    duplicates): one started before the other had finished, or never finished.

    `shift` adds to the times a process recorded (by pid), to bring them onto
    one clock: a runner under libfaketime records its executions in its own.
    """
    shift = shift or {}

    def span(run: Run) -> tuple[datetime, datetime | None]:
        moved = shift.get(run.pid, timedelta(0))
        return run.started_at + moved, None if run.finished_at is None else run.finished_at + moved

    twice = 0
    for runs in books.runs.values():
        spans = sorted(span(run) for run in runs)
        if any(end is None or end > start for (_, end), (start, _) in itertools.pairwise(spans)):
            twice += 1
    return twice


@dataclass
class Audit:
    """What the books say; `problems` lists every broken rule as a sentence."""

    jobs: int
    lost: int
    repeated: int
    unexplained_repeats: int
    problems: list[str]
    #: Pairs of executions of one job that ran at the same time while the
    #: earlier one was healthy (neither timed out nor its settle lost).
    concurrent_duplicates: int = 0


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
    concurrent = 0
    for job_id in expected & books.runs.keys():
        for earlier, later in overlapping(books.runs[job_id], killed):
            if (job_id, earlier.attempt) in not_landed:
                continue  # timed out or its result discarded: no longer a healthy attempt
            concurrent += 1
            if len(problems) < 20:
                problems.append(
                    f"job {job_id} attempt {later.attempt} (pid {later.pid}) started while "
                    f"attempt {earlier.attempt} (pid {earlier.pid}) still ran"
                )
    return Audit(len(expected), lost, repeated, unexplained, problems, concurrent)


def overlapping(runs: list[Run], killed: dict[int, float]) -> list[tuple[Run, Run]]:
    """The pairs of `runs` (one job's executions) whose times intersect: a later
    one started before an earlier one ended. An execution that never recorded
    its end ended when its process was SIGKILLed; one whose process was not
    killed is left out: its handler's own write of the end failed (the
    database was restarting), so when it ended is not known. (The scenarios
    about overlaps keep the database up: `ran_twice_at_once`.)"""

    def end(run: Run) -> float:
        if run.finished_at is not None:
            return run.finished_at.timestamp()
        return killed.get(run.pid, float("-inf"))

    ordered = sorted(runs, key=lambda run: run.started_at)
    return [
        (earlier, later)
        for n, earlier in enumerate(ordered)
        for later in ordered[n + 1 :]
        if later.started_at.timestamp() < end(earlier)
    ]


@dataclass
class CrashAudit:
    """What a ledger says about the jobs of a PostgreSQL crash scenario.

    Every run after a job's first is a *rerun*, and each must be put down to a
    cause (see `audit_crash`); `problems` lists, as sentences, the reruns no
    cause explains and every other broken rule.
    """

    jobs: int
    runs: int
    lost: int
    reruns: int
    #: Reruns after a run that ended before the crash, its settle not logged as
    #: failed: the runner saw its Done commit, and the crash forgot the commit.
    forgotten_dones: int
    #: Reruns with the attempt number of the run before: the crash forgot the
    #: claim that handed that run out, and the next claim counted the same
    #: attempt again. Overlaps `forgotten_dones` (a forgotten claim's Done, when
    #: it committed before the crash, was forgotten with it).
    reissued_claims: int
    #: Of `reissued_claims`, those whose earlier run was still running at the crash.
    reissued_in_flight: int
    #: Reruns after a run whose settle its runner logged as failed (the database
    #: was down), timed out or discarded.
    settles_not_landed: int
    unexplained: int
    #: How long before the crash was ordered the oldest forgotten commit's run
    #: started (a re-issued claim) or ended (a forgotten Done), in seconds;
    #: negative when it was after the order, while the server was going down.
    #: None when nothing was forgotten.
    oldest_forgotten_seconds: float | None
    problems: list[str]


def audit_crash(
    rows: dict[uuid.UUID, Row],
    runs: Iterable[LedgerRun],
    expected: set[uuid.UUID],
    *,
    crash: tuple[float, float],
    window: float,
    not_landed: set[tuple[uuid.UUID, int]] = frozenset(),  # type: ignore[assignment]
) -> CrashAudit:
    """Check the rows of the jobs in `expected` against the ledger's `runs`.

    `crash` is when the crash was ordered and when the database had gone (epoch
    seconds); `window` how long before it a commit may have been forgotten.
    Every expected job must be done, by a run with its final attempt number, and
    none may have run an attempt its row never counted. Each rerun must be
    explained by the run before it (the two runs in start order):

    - the same attempt number: a re-issued claim, allowed when that earlier run
      started within `window` before the crash (its claim is what was forgotten)
      under another lease than the later run's;
    - a settle its runner logged as not landed (`not_landed`);
    - a forgotten Done: the earlier run ended within `window` before the crash.

    A higher attempt number needs one of the last two; a lower one is never right.

    Anything else is unexplained: a commit the crash could not have forgotten.
    """
    crashed_from, crashed_by = crash
    problems: list[str] = []
    by_job: dict[uuid.UUID, list[LedgerRun]] = defaultdict(list)
    total = 0
    for run in runs:
        by_job[run.job_id].append(run)
        total += 1
    lost = reruns = forgotten = reissued = in_flight = failed = unexplained = 0
    ages: list[float] = []

    def problem(text: str) -> None:
        if len(problems) < 20:
            problems.append(text)

    def recent(moment: float | None) -> bool:
        return moment is not None and crashed_from - window <= moment <= crashed_by

    strays = by_job.keys() - expected
    if strays:
        unexplained += len(strays)
        problem(f"{len(strays)} jobs in the ledger were never queued by this scenario")
    for job_id in sorted(expected):
        row = rows.get(job_id)
        mine = sorted(by_job.get(job_id, []), key=lambda r: r.started)
        if row is None or row.state != "done":
            lost += 1
            problem(f"job {job_id} was lost: its row is {row.state if row else 'gone'!r}")
            continue
        attempts = {run.attempt for run in mine}
        if not mine:
            unexplained += 1
            problem(f"job {job_id} is done at attempt {row.attempts} but never ran")
        elif row.attempts not in attempts:
            unexplained += 1
            problem(f"job {job_id} is done at attempt {row.attempts}, which never ran: {attempts}")
        if mine and max(attempts) > row.attempts:
            unexplained += 1
            problem(f"job {job_id} ran attempt {max(attempts)} of {row.attempts} counted")
        for earlier, later in itertools.pairwise(mine):
            reruns += 1
            ended = earlier.finished is not None and earlier.finished <= crashed_by
            if later.attempt < earlier.attempt:
                unexplained += 1
                problem(
                    f"job {job_id} ran attempt {later.attempt} after attempt {earlier.attempt}: "
                    "a claim counted backwards"
                )
            elif later.attempt == earlier.attempt:
                reissued += 1
                in_flight += not ended
                if earlier.lease == later.lease:
                    unexplained += 1
                    problem(
                        f"job {job_id} attempt {later.attempt} was handed out twice under one "
                        f"lease ({later.lease}): no settle could tell the two runs apart"
                    )
                elif recent(earlier.started):
                    ages.append(crashed_from - earlier.started)
                else:
                    unexplained += 1
                    problem(
                        f"job {job_id} attempt {later.attempt} was handed out again, though "
                        f"the claim of its run at {earlier.started:.3f} was not within "
                        f"{window} s before the crash"
                    )
            if (job_id, earlier.attempt) in not_landed:
                failed += 1
            elif ended and recent(earlier.finished):
                forgotten += 1
                ages.append(crashed_from - (earlier.finished or 0))
            elif later.attempt > earlier.attempt:
                unexplained += 1
                problem(
                    f"job {job_id} attempt {earlier.attempt} ended at {earlier.finished} and "
                    f"ran again as attempt {later.attempt}, though its Done was not within "
                    f"{window} s before the crash nor logged as failed"
                )
    return CrashAudit(
        jobs=len(expected),
        runs=total,
        lost=lost,
        reruns=reruns,
        forgotten_dones=forgotten,
        reissued_claims=reissued,
        reissued_in_flight=in_flight,
        settles_not_landed=failed,
        unexplained=unexplained,
        oldest_forgotten_seconds=round(max(ages), 3) if ages else None,
        problems=problems,
    )


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
