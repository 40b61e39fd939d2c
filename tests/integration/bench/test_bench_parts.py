"""Each benchmark part, run at a tiny size against the test database with real
`runjobs` and enqueuer processes, produces its figures and leaves no bench row
behind; a part that belongs to PostgreSQL says so elsewhere instead of failing.

Sizes are tiny so the set stays quick: these prove the parts work, never how
fast anything is."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, reset_queries

from acmeproxy.benchmarks.bench import enqueue, stage
from acmeproxy.benchmarks.bench.measure import Result
from acmeproxy.benchmarks.bench.suite import Sizes, run
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

TINY = Sizes(
    jobs=40,
    enqueues=20,
    latency_jobs=5,
    latency_gap=0.0,
    settled=200,
    samples=5,
    pgbench_scale=1,
)

#: The figures each part measures wherever it runs.
EVERYWHERE = {
    "drain": {"drain.as_met", "drain.burst", "drain.burst_tuned", "drain.burst_lanes"},
    "routing": {"drain.as_met", "drain.routed"},
    "retry": {"drain.retry_once"},
    "debug": {"debug.off", "debug.on"},
    "latency": {"latency.as_met", "latency.after_sweep", "latency.same_process"},
    "enqueue": {
        "enqueue.as_met",
        "enqueue.debug",
        "enqueue_many.as_met",
        "enqueue.empty",
        "enqueue_many.empty",
    },
}
#: The figures each part measures on PostgreSQL only, and says it skipped elsewhere.
POSTGRESQL_ONLY = {
    "cold": {"cold.empty_stats", "cold.analyzed"},
    "load": {"load.quiet", "load.loaded"},
    "ceiling": {"ceiling.batch", "ceiling.per_pass"},
    "enqueue": {"raw.enqueue", "raw.enqueue_many", "raw.enqueue_empty", "raw.enqueue_many_empty"},
}


def measured(part: str) -> tuple[set[str], set[str], dict[str, Result]]:
    report = run([part], TINY, progress=lambda _: None)
    done = {r.key for r in report.results if not r.skipped}
    skipped = {r.key for r in report.results if r.skipped}
    return done, skipped, {r.key: r for r in report.results}


def has_its_figure(numbers: dict[str, Any]) -> bool:
    return bool(numbers.get("jobs_per_second")) or "p50" in numbers or "ratio" in numbers


def assert_no_bench_rows_left() -> None:
    left = list(Job.objects.filter(kind__startswith="bench.").values_list("kind", "state"))
    assert left == [], f"the part deletes its rows: {left}"


@pytest.mark.parametrize("part", sorted(EVERYWHERE))
def test_a_part_that_runs_everywhere_measures_each_figure_and_leaves_no_rows(part):
    done, _, results = measured(part)

    expected = EVERYWHERE[part]
    if connection.vendor == "postgresql":
        expected = expected | POSTGRESQL_ONLY.get(part, set())
    assert expected <= done, f"{part} measured {sorted(done)}"
    for key in done:
        assert has_its_figure(results[key].numbers), f"{key}: {results[key].numbers}"
    assert_no_bench_rows_left()


def test_latency_is_read_from_before_enqueue_and_from_commit_across_processes():
    _, _, results = measured("latency")

    for key in ("latency.as_met", "latency.after_sweep"):
        numbers = results[key].numbers
        assert numbers["jobs"] == TINY.latency_jobs
        assert numbers["p50"] >= numbers["from_commit"]["p50"] > 0, (
            "the wait from before enqueue includes the wait from its commit"
        )
    assert results["latency.after_sweep"].numbers["swept_rows"] >= TINY.jobs, (
        "the drain before it was settled and swept"
    )


@pytest.mark.parametrize("part", sorted(POSTGRESQL_ONLY.keys() - EVERYWHERE.keys()))
def test_a_postgresql_part_measures_there_and_says_why_it_is_skipped_elsewhere(part):
    if connection.vendor == "postgresql" and part == "load":
        import shutil

        if shutil.which("pgbench") is None:
            pytest.skip("pgbench is not installed")
    done, skipped, results = measured(part)

    if connection.vendor == "postgresql":
        assert POSTGRESQL_ONLY[part] <= done, f"{part} measured {sorted(done)}"
        for key in POSTGRESQL_ONLY[part]:
            assert has_its_figure(results[key].numbers), f"{key}: {results[key].numbers}"
    else:
        assert skipped, f"{part} says it skipped"
        assert not done, f"{part} is PostgreSQL's"
        for key in skipped:
            assert "PostgreSQL" in (results[key].skipped or ""), "it says why"
    assert_no_bench_rows_left()


@pytest.mark.postgresql
def test_the_cold_burst_meets_a_table_whose_statistics_say_it_is_empty():
    _, _, results = measured("cold")

    assert results["cold.empty_stats"].numbers["planned_rows"] in (0, 1), (
        "ANALYZE ran with no bench row present (the sweep's row may be there)"
    )
    assert results["cold.analyzed"].numbers["planned_rows"] >= TINY.jobs, (
        "the favourable burst's ANALYZE counted its rows"
    )


@pytest.mark.postgresql
def test_the_ceiling_and_load_parts_drop_what_they_create():
    run(["ceiling", "load"], TINY, progress=lambda _: None)

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_ceiling')")
        assert cursor.fetchone() == (None,), "the raw loops' scratch table is dropped"
        cursor.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s",
            [f"{connection.settings_dict['NAME']}_pgbench"],
        )
        assert cursor.fetchone() == (0,), "pgbench's database is dropped"


def test_scale_compares_a_claim_beside_history_and_leaves_no_rows():
    _, skipped, results = measured("scale")

    if connection.vendor not in stage.HISTORY_SQL:
        assert skipped == {"scale"}
        return
    numbers = results["scale"].numbers
    assert numbers["settled_rows"] == TINY.settled
    assert numbers["empty_ms"] > 0
    assert numbers["with_history_ms"] > 0
    assert_no_bench_rows_left()


def test_the_enqueue_part_logs_only_its_debug_figures_inserts_and_leaves_debug_as_it_found_it(
    settings,
):
    settings.DEBUG = True
    reset_queries()
    enqueue.one_per_transaction(3)
    quiet = sum("INSERT" in query["sql"] for query in connection.queries)
    enqueue.one_per_transaction(3, debug_on=True)
    logged = sum("INSERT" in query["sql"] for query in connection.queries) - quiet

    assert (quiet, logged, settings.DEBUG) == (0, 3, True)


def test_the_bulk_part_retries_redrives_and_drains_beside_them_leaving_no_row_behind():
    """`benchjobs --part bulk`, run only when named: its figures, and issue 36's
    rule read off them (one batch a transaction at most)."""
    from dataclasses import replace

    report = run(["bulk"], replace(TINY, bulk_rows=60), progress=lambda _: None)
    found = {r.key: r for r in report.results}
    assert set(found) == {
        "bulk_retry",
        "dead_letters",
        "redrive",
        "bulk.drain_alone",
        "bulk.drain_beside",
    }
    assert found["bulk_retry"].numbers["rows"] == 60
    assert found["bulk_retry"].numbers["largest_transaction_rows"] <= 1_000
    assert found["dead_letters"].numbers["groups"] == 1
    assert found["bulk.drain_beside"].numbers["bulk_touched"] == 60
    assert not Job.objects.filter(kind__startswith="bulkbench.").exists(), "no bulk row is left"


def test_the_dashboard_part_times_the_page_on_postgresql_and_keeps_only_its_history():
    """Issue 36's 10 million rows take minutes to write: a rerun reuses them,
    and everything else the part wrote (the backlog, runners, counts) goes."""
    report = run(["dashboard"], Sizes(dashboard_settled=300), progress=lambda _: None)
    [result] = [r for r in report.results if r.key == "dashboard"]

    if connection.vendor != "postgresql":
        assert result.skipped is not None
        assert "PostgreSQL" in result.skipped, "it says why"
        return
    assert result.numbers["median_ms"] > 0
    assert result.numbers["settled_rows"] == 300
    kept = Job.objects.filter(kind__startswith="bench.dashboard")
    assert kept.count() == 300, "the history is kept for a rerun"
    assert not kept.filter(live=True).exists(), "the backlog is deleted"
    kept.delete()


def test_the_workflows_part_measures_enqueue_and_drain_beside_the_plain_drain_leaving_no_row():
    """`benchjobs --part workflows`, run only when named: issue 37's figures,
    its goals judged against the plain drain of the same run, and none of the
    workflows', steps' or edges' rows left behind."""
    from dataclasses import replace

    from jobs.models import Dependency, Workflow, WorkflowStep

    sizes = replace(TINY, workflow_width=12, small_workflows=3, small_workflow_width=2)
    report = run(["workflows"], sizes, progress=lambda _: None)

    found = {r.key: r for r in report.results}
    assert set(found) == {
        "workflows.plain_drain",
        "workflows.wide_enqueue",
        "workflows.wide_drain",
        "workflows.small_enqueue",
        "workflows.small_drain",
    }
    assert found["workflows.wide_drain"].numbers["steps"] == 14
    assert found["workflows.small_drain"].numbers["steps"] == 12
    for result in found.values():
        assert result.rate, f"{result.key}: {result.numbers}"
    judged = {check.name: check for check in report.checks if check.name.startswith("issue 37")}
    assert len(judged) == (3 if connection.vendor == "postgresql" else 2)
    assert all(check.met is not None for check in judged.values()), "each goal is judged"
    assert_no_bench_rows_left()
    assert not Workflow.objects.exists(), "the workflows are deleted"
    assert not WorkflowStep.objects.exists()
    assert not Dependency.objects.exists()
