"""The instructions part's workloads, run for real against the test database
with a stand-in for callgrind: each counted process does the work it is
counted for, the part subtracts the empty run and divides by the jobs, and
no bench row is left. Callgrind itself is not run here (a counted start-up
takes half a minute); its out file and the budget's verdict are unit-tested,
and `benchjobs --check` and `--write-budget` are run here over counts given
to them."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Mapping, Sequence

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from acmeproxy.benchmarks.bench import budget, instructions
from acmeproxy.benchmarks.bench.measure import INSTRUCTIONS, Result
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


def counts(runner: int, enqueue: int, many: int) -> list[Result]:
    return [
        Result(instructions.PREFIX + name, label, INSTRUCTIONS, {"instructions": count})
        for (name, label), count in zip(
            instructions.LABELS.items(), (runner, enqueue, many), strict=True
        )
    ]


@pytest.fixture
def budget_file(tmp_path, monkeypatch):
    """The budget at 300,000 / 400,000 / 100,000 on this database, in a file of the test's."""
    path = tmp_path / "budget.json"
    monkeypatch.setattr(budget, "BUDGET_FILE", path)
    budget.write(
        connection.vendor,
        {"runner_per_job": 300_000, "enqueue_per_call": 400_000, "enqueue_many_per_row": 100_000},
    )
    return path


def test_benchjobs_check_fails_naming_the_count_over_its_budget_and_by_how_much(
    budget_file, monkeypatch
):
    monkeypatch.setattr(
        instructions, "counted", lambda *args, **kwargs: counts(315_000, 400_000, 90_000)
    )
    out = io.StringIO()

    with pytest.raises(CommandError) as raised:
        call_command("benchjobs", "--part", "instructions", "--check", stdout=out)

    assert "runner_per_job: 315,000 instructions, +5.00% over its budget of 300,000" in str(
        raised.value
    )
    assert "enqueue_many_per_row" not in str(raised.value), "a lower count is no failure"
    assert "315,000" in out.getvalue()
    assert "300,000" in out.getvalue(), "the report shows the budget beside the count"


def test_benchjobs_check_passes_within_two_percent_and_still_prints_both_figures(
    budget_file, monkeypatch
):
    monkeypatch.setattr(
        instructions, "counted", lambda *args, **kwargs: counts(306_000, 400_000, 100_000)
    )
    out = io.StringIO()

    call_command("benchjobs", "--part", "instructions", "--check", stdout=out)

    line = next(row for row in out.getvalue().splitlines() if row.startswith("runner_per_job"))
    assert "306,000" in line
    assert "300,000" in line
    assert "within" in line


def test_benchjobs_write_budget_writes_this_databases_counts(budget_file, monkeypatch):
    monkeypatch.setattr(
        instructions, "counted", lambda *args, **kwargs: counts(290_000, 390_000, 95_000)
    )

    call_command("benchjobs", "--part", "instructions", "--write-budget", stdout=io.StringIO())

    assert budget.read(budget_file)[connection.vendor] == {
        "runner_per_job": 290_000,
        "enqueue_per_call": 390_000,
        "enqueue_many_per_row": 95_000,
    }
