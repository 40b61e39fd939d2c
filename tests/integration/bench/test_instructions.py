"""The instructions part's workloads, run for real against the test database
with a stand-in for callgrind: each counted process does the work it is
counted for, the part subtracts the empty run and divides by the jobs, and
no bench row is left. Callgrind itself is not run here (a counted start-up
takes half a minute); its out file and the budget's verdict are unit-tested."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import pytest

from acmeproxy.benchmarks.bench import instructions
from acmeproxy.benchmarks.bench.runner import ROOT
from acmeproxy.benchmarks.jobs import NOOP
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def rows_as_instructions(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Runs `argv` as callgrind would, then "counts" 1,000 instructions per bench
    row it left done or queued, plus 7 for the start-up every run shares."""
    subprocess.run(argv, cwd=ROOT, env=dict(env), stdout=subprocess.DEVNULL, check=True)
    return 1_000 * Job.objects.filter(kind=NOOP, state__in=("done", "queued")).count() + 7


def test_each_measure_is_its_run_less_the_empty_one_divided_by_the_jobs_and_no_row_is_left():
    results = instructions.counted(12, 2, counter=rows_as_instructions)

    assert instructions.measured(results) == {
        "runner_per_job": 1_000,
        "enqueue_per_call": 1_000,
        "enqueue_many_per_row": 1_000,
    }, "each run did its 12 jobs, and each empty run none"
    runner = results[0].numbers
    assert runner["runs"] == [1_000, 1_000]
    assert runner["spread"] == "0.00%"
    assert runner["empty_run"] == 7
    assert not Job.objects.filter(kind__startswith="bench.").exists()


def test_a_counted_run_that_does_not_do_its_work_fails_the_part():
    def does_nothing(argv: Sequence[str], env: Mapping[str, str]) -> int:
        return 1

    with pytest.raises(instructions.CountFailed, match="0 of 12 bench jobs were done"):
        instructions.counted(12, 1, counter=does_nothing)
    assert not Job.objects.filter(kind__startswith="bench.").exists()


def test_a_count_over_its_budget_is_counted_again_until_three_rounds_decide():
    asked = []

    def always_over(medians: dict[str, int]) -> bool:
        asked.append(medians)
        return True

    results = instructions.counted(3, 1, counter=rows_as_instructions, over=always_over)

    assert len(asked) == 2, "asked after the first round and the second, never after the third"
    assert asked[0] == {name: 1_000 for name in instructions.LABELS}
    assert all(len(result.numbers["runs"]) == 3 for result in results)
