"""The instructions part: what the runner and the client execute, counted by
callgrind rather than timed, so a change's cost is a number the machine's
load does not move.

Three measures, each a difference of two runs of the same process under
`valgrind --tool=callgrind --separate-threads=no` (every thread counted),
divided by the work between them:

- `runner_per_job`: `manage.py runjobs --burst` at the default config over
  `count` ready payload jobs of the benchmark's no-op kind (queued before it
  starts, as the favourable drains queue theirs), less the same command
  over none.
- `enqueue_per_call`: `count` `enqueue` calls, each its own transaction, spec
  building included (`bench.counted`), less the same script enqueuing none
  (every run of it first makes one call of each verb, so the first call's
  set-up is in both).
- `enqueue_many_per_row`: one `enqueue_many` call of `count` specs, less the
  same empty run.

Every process runs with this process's python, database and settings, with
`DEBUG` off, and with two things pinned, neither of them a config key:
`PYTHONHASHSEED=0` (a random hash seed moves the order of sets and dicts of
strings, and with it the start-up's count, from run to run) and
`JOBS_CONFIG_CHECK_SECONDS` at an hour (the runner re-reads the config row
every second of real time; under callgrind a drain of 2,000 jobs takes ten
seconds more than the empty run, so it counted ~10 extra re-reads, ~7,000
instructions a job, more or fewer with the machine's load). Each command
runs once outside callgrind first, so the bytecode it compiles is written
before a counted run (else the first run pays for it). The job table's bench
rows are deleted before and after each run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import median

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.budget import callgrind_total, spread
from acmeproxy.benchmarks.bench.counted import WARM
from acmeproxy.benchmarks.bench.measure import INSTRUCTIONS, Result
from acmeproxy.benchmarks.bench.runner import ROOT, child_env
from acmeproxy.benchmarks.jobs import NOOP
from jobs.models import Job

#: Runs one command (argv, environment) and returns the instructions it executed.
Counter = Callable[[Sequence[str], Mapping[str, str]], int]

#: The measures, in the order they are reported, with what each counts.
LABELS = {
    "runner_per_job": "runner instructions per job (runjobs --burst, default config)",
    "enqueue_per_call": "client instructions per enqueue (spec included)",
    "enqueue_many_per_row": "client instructions per enqueue_many row (spec included)",
}
#: Where each measure's result is found in a report.
PREFIX = "instructions."
#: The most rounds counted when the first say a count is over its budget.
CONFIRM_ROUNDS = 3


class CountFailed(RuntimeError):
    """A counted process failed, or did not do the work it was given."""


def callgrind(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Instructions executed by `argv` and every thread it starts (the files of
    any process it forks are added in)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise CountFailed("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as directory:
        completed = subprocess.run(
            [
                valgrind,
                "--tool=callgrind",
                "--separate-threads=no",
                f"--callgrind-out-file={directory}/callgrind.out.%p",
                "-q",
                *argv,
            ],
            cwd=ROOT,
            env=dict(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if completed.returncode:
            tail = completed.stderr.strip().splitlines()[-5:]
            raise CountFailed(
                f"{' '.join(argv[1:])} exited with status {completed.returncode} "
                f"under callgrind: {' / '.join(tail)}"
            )
        outs = sorted(Path(directory).glob("callgrind.out.*"))
        if not outs:
            raise CountFailed("callgrind wrote no out file")
        return sum(callgrind_total(out.read_text()) for out in outs)


def environment() -> dict[str, str]:
    return child_env(PYTHONHASHSEED="0", JOBS_CONFIG_CHECK_SECONDS="3600")


def runjobs() -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), "runjobs", "--burst"]


def client(mode: str, count: int) -> list[str]:
    return [sys.executable, "-m", "acmeproxy.benchmarks.bench.counted", mode, str(count)]


def warm_up() -> None:
    """Each command once outside callgrind, on an empty table: what it
    compiles is then cached for every counted run."""
    stage.clean()
    for argv in (runjobs(), client("enqueue", 0)):
        subprocess.run(argv, cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL, check=True)


def _left(count: int, state: str) -> None:
    """Checks that the run left `count` bench jobs in `state` (beside the
    client's warm-up jobs), then deletes them all."""
    found = Job.objects.filter(kind=NOOP, state=state).exclude(key__startswith=WARM).count()
    stage.clean()
    if found != count:
        raise CountFailed(f"{found} of {count} bench jobs were {state}")


def one_round(count: int, counter: Counter) -> dict[str, tuple[int, int]]:
    """Every measure counted once: {measure: (with the work, without it)}."""
    env = environment()
    stage.clean()
    stage.insert_ready(NOOP, count)
    drained = counter(runjobs(), env)
    _left(count, "done")
    idle = counter(runjobs(), env)
    stage.clean()
    enqueued = counter(client("enqueue", count), env)
    _left(count, "queued")
    many = counter(client("enqueue_many", count), env)
    _left(count, "queued")
    empty = counter(client("enqueue", 0), env)
    stage.clean()
    return {
        "runner_per_job": (drained, idle),
        "enqueue_per_call": (enqueued, empty),
        "enqueue_many_per_row": (many, empty),
    }


def counted(
    count: int,
    repeat: int,
    counter: Counter = callgrind,
    over: Callable[[dict[str, int]], bool] = lambda _: False,
) -> list[Result]:
    """Each measure `repeat` times (the rounds alternate, so a drift touches
    every measure alike); the median, every run, and their spread.

    While `over(medians)` says a median is over its budget, another round is
    counted, up to `CONFIRM_ROUNDS` in all. Three rounds usually agree within
    0.3 %, but on a loaded machine one drain in a few counted ~2.5 % high
    (how many worker threads it wakes, and what runs on them, follow the
    timing), and one such run must not fail a check the median passes."""
    warm_up()
    with stage.config():
        rounds = [one_round(count, counter) for _ in range(max(1, repeat))]
        while len(rounds) < CONFIRM_ROUNDS and over(_medians(rounds, count)):
            rounds.append(one_round(count, counter))
    results = []
    for name, label in LABELS.items():
        per_job = _per_job(rounds, name, count)
        numbers: dict[str, object] = {
            "instructions": round(median(per_job)),
            "jobs": count,
            "empty_run": round(median(r[name][1] for r in rounds)),
        }
        if len(rounds) > 1:
            numbers["runs"] = per_job
            numbers["spread"] = f"{spread(per_job):.2%}"
        results.append(Result(PREFIX + name, label, INSTRUCTIONS, numbers))
    return results


def _per_job(rounds: Sequence[dict[str, tuple[int, int]]], name: str, count: int) -> list[int]:
    return [round((full - empty) / count) for full, empty in (r[name] for r in rounds)]


def _medians(rounds: Sequence[dict[str, tuple[int, int]]], count: int) -> dict[str, int]:
    return {name: round(median(_per_job(rounds, name, count))) for name in LABELS}


def measured(results: Sequence[Result]) -> dict[str, int]:
    """{measure: instructions} from a report's results."""
    return {
        r.key.removeprefix(PREFIX): int(r.numbers["instructions"])
        for r in results
        if r.key.startswith(PREFIX) and not r.skipped
    }
