"""The benchmark's own arithmetic and presentation (`acmeproxy.benchmarks.bench`):
percentiles, the median of repeated runs, ratios and issue 24's targets, the
report's order, what `benchjobs` accepts, and the instruction budget's
arithmetic (callgrind's out file, the 2 % rule). No database."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import CommandParser

from acmeproxy.benchmarks.bench import budget, ratios
from acmeproxy.benchmarks.bench.instructions import LABELS
from acmeproxy.benchmarks.bench.measure import (
    AS_MET,
    FAVOURABLE,
    RAW,
    SCALE,
    Check,
    Result,
    latency_summary,
    median_of,
    percentile,
    report_lines,
)
from acmeproxy.benchmarks.bench.procfs import ResidentMemory
from acmeproxy.benchmarks.bench.suite import CHOICES, PARTS
from acmeproxy.benchmarks.management.commands.benchjobs import Command


def rate(key: str, jobs_per_second: float, group: str = AS_MET) -> Result:
    return Result(key, key, group, {"jobs_per_second": jobs_per_second})


def test_a_percentile_is_a_wait_some_job_really_had():
    """Nearest rank, not interpolation: a p99 of a latency run names a real wait."""
    waits = [float(n) for n in range(1, 201)]

    assert percentile(waits, 0.50) == 100.0
    assert percentile(waits, 0.99) == 198.0
    assert percentile(waits, 1.0) == 200.0, "the worst is the largest"
    assert percentile([7.0], 0.99) == 7.0, "one sample is every percentile"


def test_a_percentile_of_unordered_waits_sorts_them_first():
    assert percentile([9.0, 1.0, 5.0], 0.5) == 5.0


def test_a_percentile_of_no_waits_is_refused():
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_a_latency_summary_gives_p50_p95_p99_and_the_worst_rounded_to_hundredths():
    summary = latency_summary([1.234, 2.345, 3.456, 100.0])

    assert summary == {"p50": 2.35, "p95": 100.0, "p99": 100.0, "max": 100.0}


def test_a_repeated_part_reports_its_median_run_and_every_runs_rate():
    rates = iter([(300, 10), (100, 30), (200, 20)])

    def run() -> list[Result]:
        drain, enqueue = next(rates)
        return [
            Result("drain", "drain", AS_MET, {"jobs_per_second": drain, "run": drain}),
            rate("enqueue", enqueue),
        ]

    drain, enqueue = median_of(3, run)

    assert drain.numbers["jobs_per_second"] == 200
    assert drain.numbers["run"] == 200, "the median run's other numbers come with it"
    assert drain.numbers["runs_jobs_per_second"] == [300, 100, 200], "in the order they ran"
    assert enqueue.numbers["jobs_per_second"] == 20, "each part's median is its own"


def test_a_single_run_is_reported_as_it_is():
    (only,) = median_of(1, lambda: [rate("drain", 5)])

    assert only.numbers == {"jobs_per_second": 5}


def test_each_figure_is_shown_as_a_fraction_of_its_raw_loop_measured_in_the_same_run():
    results = [
        rate("drain.as_met", 2_000),
        rate("ceiling.batch", 20_000, RAW),
        rate("enqueue.as_met", 900),
        rate("raw.enqueue", 1_000, RAW),
    ]

    lines = dict(ratios.ratio_lines(results))

    assert lines["drain as met / raw SKIP LOCKED batch loop"] == "10%"
    assert lines["enqueue, payload / raw INSERT+commit loop"] == "90%"
    assert "drain under pgbench write load / quiet" not in lines, "a ratio needs both figures"


def test_a_skipped_raw_loop_gives_no_ratio():
    results = [rate("drain.as_met", 2_000), Result("ceiling.batch", "x", RAW, skipped="PG only")]

    assert ratios.ratio_lines(results) == []


def test_targets_are_met_at_their_bound_and_not_below_it():
    results = [
        rate("drain.as_met", 2_500),
        rate("ceiling.batch", 10_000, RAW),
        rate("debug.on", 84),
        rate("debug.off", 100),
    ]

    found = {check.name: check for check in ratios.checks(results, "postgresql")}

    assert found["drain as met vs raw batch loop"].met is True, "25% is the target itself"
    assert found["drain as met vs raw batch loop"].value == "25%"
    assert found["drain, DEBUG=True vs DEBUG=False"].met is False, "84% is below 85%"
    assert found["drain, DEBUG=True vs DEBUG=False"].verdict == "NOT MET"
    assert found["drain under write load vs quiet"].met is None, "not measured in this run"
    assert found["drain under write load vs quiet"].verdict == "not measured"


def test_postgresql_latency_targets_read_both_from_before_enqueue_and_from_commit():
    latency = Result(
        "latency.as_met",
        "latency",
        AS_MET,
        {"p50": 2.4, "p99": 5.0, "from_commit": {"p50": 1.0, "p99": 2.9}},
    )

    found = {check.name: check.met for check in ratios.checks([latency], "postgresql")}

    assert found["start latency, p50 from before enqueue"] is True
    assert found["start latency, p99 from before enqueue"] is False, "the bound is strict"
    assert found["start latency, p50 from commit"] is True
    assert found["start latency, p99 from commit"] is True
    assert found["after drain and sweep, p50 from before enqueue"] is None


def test_sqlite_is_held_to_its_own_latency_targets_and_mysql_to_none():
    latency = Result("latency.as_met", "latency", AS_MET, {"p50": 9.0, "p99": 60.0})

    sqlite = {check.name: check.met for check in ratios.checks([latency], "sqlite")}
    mysql = [check.name for check in ratios.checks([latency], "mysql")]

    assert sqlite["start latency, p50 from before enqueue (SQLite)"] is True
    assert sqlite["start latency, p99 from before enqueue (SQLite)"] is False
    assert not [name for name in mysql if "latency" in name], "MySQL polls by design"


def test_the_report_leads_with_the_as_met_figures_then_favourable_then_scale():
    results = [
        Result("scale", "claim beside history", SCALE, {"ratio": 1.02}),
        rate("drain.burst", 7_000, FAVOURABLE),
        rate("ceiling.batch", 30_000, RAW),
        rate("drain.as_met", 3_000),
        Result("cold.empty_stats", "cold burst", AS_MET, skipped="PostgreSQL only"),
    ]
    checks = [Check("drain as met vs raw batch loop", ">= 25%", "10%", False)]

    lines = report_lines({"database": "postgresql 15"}, results, [("drain / raw", "10%")], checks)
    text = "\n".join(lines)

    assert lines[0] == "database: postgresql 15", "the header comes first"
    order = [
        text.index("== As users meet it"),
        text.index("== Raw loops"),
        text.index("== Ratios"),
        text.index("== Issue 24's targets"),
        text.index("== Favourable"),
        text.index("== Scale"),
    ]
    assert order == sorted(order), text
    assert "3,000 jobs/s" in text
    assert "x1.02" in text
    assert "NOT MET" in text
    cold = next(line for line in lines if line.startswith("cold burst"))
    assert "skipped" in cold
    assert "PostgreSQL only" in cold, "a skipped part says why"


def parser() -> CommandParser:
    return Command().create_parser("manage.py", "benchjobs")


def test_benchjobs_runs_every_part_unless_parts_are_named():
    assert parser().parse_args([]).part is None
    options = parser().parse_args(["--part", "cold", "--part", "drain", "--jobs", "500"])
    assert options.part == ["cold", "drain"]
    assert options.jobs == 500


def test_benchjobs_names_every_part_it_can_run():
    assert set(PARTS) == {
        "drain",
        "routing",
        "retry",
        "debug",
        "cold",
        "load",
        "latency",
        "enqueue",
        "ceiling",
        "scale",
    }


@pytest.mark.parametrize(
    "arguments", [["--part", "nonsense"], ["--jobs", "0"], ["--repeat", "two"]]
)
def test_benchjobs_refuses_an_unknown_part_or_a_size_below_one(arguments):
    with pytest.raises(CommandError):
        call_command("benchjobs", *arguments)


def test_resident_memory_shows_a_process_that_grows_late_in_its_run():
    """What tells a runner that grows with every job from one that is flat:
    a process that takes 200 MB halfway through peaks far higher over its
    whole run than over its first quarter."""
    grows = "import time; time.sleep(1); held = b'x' * (200 * 2**20); time.sleep(1)"
    process = subprocess.Popen([sys.executable, "-c", grows])
    memory = ResidentMemory(process.pid)
    assert process.wait(timeout=30) == 0

    quarter, whole = memory.peak(0.25), memory.peak()

    assert quarter is not None, "sampled from /proc"
    assert whole is not None
    assert whole - quarter > 150, f"{quarter} MB in the first quarter, {whole} MB in all"


def test_instructions_runs_only_when_named_since_it_needs_valgrind_and_minutes():
    assert "instructions" in CHOICES
    assert "instructions" not in PARTS, "a plain `benchjobs` does not count instructions"
    assert parser().parse_args(["--part", "instructions", "--check"]).check is True


def test_the_dashboard_part_runs_only_when_named_since_it_writes_10_million_rows_first():
    assert "dashboard" in CHOICES
    assert "dashboard" not in PARTS, "a plain `benchjobs` does not write 10 million rows"
    options = parser().parse_args(["--part", "dashboard", "--dashboard-settled", "1000"])
    assert options.dashboard_settled == 1000
    assert parser().parse_args([]).dashboard_settled == 10_000_000, "issue 36's size"


def test_the_workflows_part_runs_only_when_named_since_it_answers_issue_37s_goals():
    assert "workflows" in CHOICES
    assert "workflows" not in PARTS, "a plain `benchjobs` does not queue workflows"
    options = parser().parse_args(["--part", "workflows", "--workflow-width", "100"])
    assert (options.workflow_width, options.small_workflows) == (100, 1_000)
    assert parser().parse_args([]).workflow_width == 10_000, "issue 37's size"


def test_benchjobs_refuses_a_budget_check_without_the_instructions_part():
    with pytest.raises(CommandError, match="--part instructions"):
        call_command("benchjobs", "--part", "drain", "--check")


#: The head and tail of a real callgrind out file (valgrind 3.19,
#: --separate-threads=no), its cost lines cut.
CALLGRIND_OUT = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 11053
cmd:  /work/main/.venv/bin/python -c import django
part: 1


desc: I1 cache:
desc: Timerange: Basic block 0 - 21734388
desc: Trigger: Program termination

positions: line
events: Ir
summary: 108166639


fl=(1) ???
fn=(1) 0x0000000000020290
0 3
cfn=(2) _dl_start
calls=1 0
0 108166636

totals: 108166639
"""


def test_a_callgrind_total_is_the_instructions_its_totals_line_counts():
    assert budget.callgrind_total(CALLGRIND_OUT) == 108_166_639


def test_a_callgrind_total_reads_the_ir_column_when_more_events_are_counted():
    text = "events: Dr Ir Dw\nsummary: 5 900 7\ntotals: 6 1000 8\n"

    assert budget.callgrind_total(text) == 1_000, "Ir's column, and totals before summary"


def test_a_callgrind_total_falls_back_to_the_summary_line():
    assert budget.callgrind_total("events: Ir\nsummary: 42\n") == 42


@pytest.mark.parametrize(
    "text",
    [
        "events: Dr\ntotals: 5\n",
        "events: Ir\nfn=main\n0 5\n",
        "summary: 5\ntotals: 5\n",
        "",
    ],
)
def test_a_file_without_an_instruction_total_is_refused_not_read_as_zero(text):
    with pytest.raises(budget.CallgrindOutputError):
        budget.callgrind_total(text)


def test_the_spread_of_repeated_counts_is_their_range_over_their_median():
    assert budget.spread([300_000, 303_000, 301_500]) == pytest.approx(0.00995, abs=1e-5)
    assert budget.spread([7]) == 0.0


def test_a_count_up_to_two_percent_over_its_budget_passes_and_one_above_fails():
    at_bound, over, lower = budget.verdicts(
        {"runner_per_job": 300_000, "enqueue_per_call": 100_000, "enqueue_many_per_row": 50_000},
        {"runner_per_job": 306_000, "enqueue_per_call": 102_001, "enqueue_many_per_row": 40_000},
    )

    assert at_bound.within is True, "+2.00 % is allowed"
    assert over.within is False, "+2.001 % is not"
    assert lower.within is True, "a lower count passes (then lower the budget)"
    assert "+2.00%" in over.failure()
    assert "enqueue_per_call" in over.failure()
    assert "100,000" in over.failure(), "the failure names the budget it broke"


def test_a_verdict_line_shows_the_count_and_its_budget_either_way():
    within, over = budget.verdicts(
        {"runner_per_job": 300_000, "enqueue_per_call": 100_000},
        {"runner_per_job": 299_000, "enqueue_per_call": 110_000},
    )

    assert "299,000" in within.line()
    assert "300,000" in within.line()
    assert "within" in within.line()
    assert "110,000" in over.line()
    assert "100,000" in over.line()
    assert "+10.00%" in over.line()
    assert "OVER" in over.line()


def test_a_count_with_no_budget_fails_the_check_rather_than_passing_unchecked():
    (verdict,) = budget.verdicts({}, {"runner_per_job": 300_000})

    assert verdict.within is False
    assert "no budget" in verdict.failure()


def test_writing_one_vendors_budget_keeps_the_others(tmp_path):
    path = tmp_path / "budget.json"
    budget.write("sqlite", {"runner_per_job": 700_000}, path)
    budget.write("postgresql", {"runner_per_job": 300_000}, path)
    budget.write("sqlite", {"runner_per_job": 690_000}, path)

    assert budget.read(path) == {
        "postgresql": {"runner_per_job": 300_000},
        "sqlite": {"runner_per_job": 690_000},
    }
    assert "2 %" in json.loads(path.read_text())["about"], "the file says what it holds"


def test_a_missing_budget_file_reads_as_no_budget(tmp_path):
    assert budget.read(tmp_path / "absent.json") == {}


def test_only_a_count_over_a_budget_it_has_asks_for_another_round():
    figures = {"runner_per_job": 300_000}

    assert budget.over(figures, {"runner_per_job": 306_001}) is True
    assert budget.over(figures, {"runner_per_job": 306_000}) is False
    assert budget.over(figures, {"enqueue_per_call": 10**9}) is False, (
        "no budget: nothing to confirm"
    )


def test_the_committed_budget_holds_every_measure_for_sqlite_and_postgresql():
    committed = budget.read()

    assert set(committed) == {"sqlite", "postgresql"}
    for figures in committed.values():
        assert set(figures) == set(LABELS)
        assert all(count > 0 for count in figures.values())
