"""The PostgreSQL claim's plan, whatever the planner believes about jobs_job.

The runner's connection prepares the claim and the pass (`CLAIM_SQL`,
`SETTLE_AND_CLAIM_SQL`) and plans each once, a generic plan kept for as long
as the connection lives (or until an ANALYZE invalidates it). Costed from the
table's statistics, that plan was a scan and a sort of every ready row
whenever they said the table was small, and a burst of 20,000 jobs then
drained at ~800 a second instead of ~4,000. Each test here puts the table in
one statistics state, plans both statements there as the runner's connection
does, lets a burst of ready rows arrive, plans them again, and reads the plans.

Each test works on a jobs_job of its own, made in its own transaction (see
`own_jobs_table`): the shared table carries whatever ANALYZE other tests, or
autovacuum, left in its statistics, and no test can take that back.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper

from jobs.models import Job
from jobs.store import for_database
from jobs.store.admission import Admission
from jobs.store.postgresql import sql as pg_sql
from tests.integration.store.support import KIND, LEASE, T0

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db]

#: Ready rows arriving at once: enough that reading them all, or sorting them,
#: costs far more than a claim of 8.
BURST = 20_000

#: The statements whose plans must not depend on statistics.
STATEMENTS = {"claim": pg_sql.CLAIM_SQL, "settle_and_claim": pg_sql.SETTLE_AND_CLAIM_SQL}
#: The same under kinds' caps (`jobs.store.limits`).
CAPPED_STATEMENTS = {
    "claim_capped": pg_sql.CLAIM_CAPPED_SQL,
    "settle_and_claim_capped": pg_sql.SETTLE_AND_CLAIM_CAPPED_SQL,
}

#: Values to explain them with: a pass of 8, settling 8 rows. A generic plan is
#: made without looking at them.
PARAMS: dict[str, Any] = {
    "now": T0,
    "kinds": "{" + KIND + "}",
    "queues": None,
    "paused": "{}",
    "cap_kinds": "{" + KIND + "}",
    "caps": "{2}",
    "expires": "{" + (T0 + LEASE).isoformat() + "}",
    "limit": 8,
    "ids": "{" + ",".join(str(uuid.uuid4()) for _ in range(8)) + "}",
    "attempts": "{" + ",".join(["1"] * 8) + "}",
    "leases": "{" + ",".join([(T0 + LEASE).isoformat()] * 8) + "}",
    "results": "{" + ",".join(["NULL"] * 8) + "}",
    "runner": "host:1",
}

#: A node that reads rows of jobs_job itself (not one of its indexes).
_TABLE_SCAN = re.compile(r"^(?:->\s*)?(?P<node>[\w ]*Scan[\w ]*) on jobs_job\b")


@pytest.fixture(autouse=True)
def own_jobs_table() -> None:
    """A jobs_job made from the model (its indexes, and migration 0004's
    fillfactor) in a schema of this test's own, first on the search path, all
    inside the test's transaction and gone with it. No ANALYZE has read it,
    and autovacuum cannot: it cannot see a table that was never committed."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA jobs_plan_test")
        cursor.execute("SET LOCAL search_path = jobs_plan_test, public")
    with connection.schema_editor() as editor:
        editor.create_model(Job)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job SET (fillfactor = 80)")
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'jobs_job'::regclass")
        assert cursor.fetchone() == (-1,), "the test's table has never been analyzed"


def runner_plans(cursor: CursorWrapper, statements: dict[str, str] = STATEMENTS) -> dict[str, str]:
    """Each statement's plan as the runner's connection makes it now: the
    runner's settings made for this transaction, as the driver makes them
    for each pass, then each statement prepared (`PREPARE`) and its generic
    plan explained (`EXPLAIN EXECUTE`)."""
    cursor.execute(pg_sql.PLANNER_SETTINGS_SQL)
    plans = {}
    for label, statement in statements.items():
        names, text = _numbered(statement)
        name = f"jobs_plan_{label}_{uuid.uuid4().hex[:8]}"
        cursor.execute(f"PREPARE {name} AS {text}")
        cursor.execute(
            f"EXPLAIN EXECUTE {name}({', '.join(['%s'] * len(names))})",
            [PARAMS[param] for param in names],
        )
        plans[label] = "\n".join(line for (line,) in cursor.fetchall())
        cursor.execute(f"DEALLOCATE {name}")
    return plans


def _numbered(statement: str) -> tuple[list[str], str]:
    """The driver's named placeholders in order of first use, and `statement`
    with each written as its number (`$1`...), as PREPARE takes them."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
    return names, re.sub(r"%\((\w+)\)s", lambda found: f"${names.index(found[1]) + 1}", statement)


def assert_ready_rows_come_in_claim_order(
    plans: dict[str, str], when: str, *, generic: bool = True
) -> None:
    """The plan the issue asks for: the priorities walked down the ready index
    one descent each, each priority's ready rows read from that index in
    claim order up to the limit, every other row found by primary key,
    nothing sorted, and (unless not `generic`: unprepared) made once for
    every execution."""
    for label, plan in plans.items():
        if generic:
            assert "$1" in plan, f"{label}, {when}: the plan is generic, made once:\n{plan}"
        nodes = [line.strip().removeprefix("->").strip() for line in plan.splitlines()]
        nodes = [node.split("  (cost=")[0] for node in nodes if "(cost=" in node]
        # Without the alias a scan of the table a second time is given.
        nodes = [re.sub(r" on jobs_job \w+$", " on jobs_job", node) for node in nodes]
        ready = ["Limit", "LockRows", "Index Scan Backward using jobs_job_ready on jobs_job"]
        assert any(nodes[n : n + 3] == ready for n in range(len(nodes))), (
            f"{label}, {when}: each priority's ready rows are read from jobs_job_ready in "
            f"claim order, and the reading stops at the limit:\n{plan}"
        )
        assert "Recursive Union" in nodes, f"{label}, {when}: the priorities are walked:\n{plan}"
        levels = nodes.index("Recursive Union")
        assert nodes[levels + 1 : levels + 3] == [
            "Limit",
            "Index Only Scan using jobs_job_ready on jobs_job",
        ], f"{label}, {when}: the priorities are found by descents of jobs_job_ready:\n{plan}"
        # Under caps, only the few locked rows are ranked per kind (a sort of
        # the CTE's rows, at most the claim's limit).
        sorts = [node for node in nodes if node.endswith("Sort")]
        keys = [line.strip() for line in plan.splitlines() if "Sort Key:" in line]
        assert len(sorts) == ("capped" in label), (
            f"{label}, {when}: nothing is sorted but, under caps, the locked rows:\n{plan}"
        )
        assert all(re.match(r"Sort Key: ready_\d+\.kind, ", key) for key in keys), (
            f"{label}, {when}: the sort ranks the locked rows (the ready CTE) per kind:\n{plan}"
        )
        scans = [
            found["node"]
            for line in plan.splitlines()
            if (found := _TABLE_SCAN.match(line.strip()))
        ]
        assert all(
            scan
            in (
                "Index Scan Backward using jobs_job_ready",
                "Index Only Scan using jobs_job_ready",
                "Index Scan using jobs_job_pkey",
            )
            for scan in scans
        ), f"{label}, {when}: rows are found through an index, never a scan of the table:\n{plan}"


def insert_ready(cursor: CursorWrapper, count: int, prefix: str = "ready") -> None:
    """`count` queued rows of KIND, ready at T0, oldest first; one statement."""
    cursor.execute(
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at)
        SELECT gen_random_uuid(), %s, %s || n, '{}', 'queued', 0, 5,
               %s - n * interval '1 millisecond', '', %s, %s
        FROM generate_series(1, %s) AS n
        """,
        [KIND, prefix, T0, T0, T0, count],
    )


def analyze(cursor: CursorWrapper) -> None:
    cursor.execute("ANALYZE jobs_job")


def test_a_claim_planned_before_jobs_job_was_ever_analyzed_reads_a_burst_from_the_ready_index():
    """A new install: the runner's first pass is planned on an empty table that
    nothing has analyzed yet, and that plan meets the first burst."""
    with connection.cursor() as cursor:
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "never analyzed, empty")
        insert_ready(cursor, BURST)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "never analyzed, a burst")


def test_a_claim_planned_after_jobs_job_was_analyzed_empty_reads_a_burst_from_the_ready_index():
    """Autovacuum analyzes a drained table: its statistics then say it is empty
    until the next ANALYZE, long after the next burst has arrived."""
    with connection.cursor() as cursor:
        analyze(cursor)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "analyzed empty")
        insert_ready(cursor, BURST)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "analyzed empty, a burst")


def test_a_claim_planned_among_a_million_settled_rows_reads_ready_rows_from_the_ready_index():
    """Months of history kept: the statistics say almost no row is live.

    A million rows, as the issue puts it, in one INSERT ... SELECT: 6 to 15 s
    on a 2-core machine, most of it writing the table's five indexes. Ids and
    keys ascend, so each index entry goes on its index's last page (random
    UUIDs took twice as long).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts,
                                  run_at, last_error, created_at, updated_at, finished_at)
            SELECT lpad(to_hex(n), 32, '0')::uuid, %s, lpad(n::text, 7, '0'), '{}', 'done',
                   1, 5, at, '', at, at, at
            FROM generate_series(1, 1000000) AS n,
                 LATERAL (SELECT %s - interval '30 days' + n * interval '1 second' AS at) AS t
            """,
            [KIND, T0],
        )
        insert_ready(cursor, 20, prefix="waiting")
        analyze(cursor)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "a million settled")
        insert_ready(cursor, BURST)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "a million settled, a burst")


def test_a_claim_planned_on_jobs_job_full_of_dead_rows_reads_a_burst_from_the_ready_index():
    """After a drain and a sweep, before any VACUUM: every page holds dead rows
    only. Autovacuum's ANALYZE (which comes before its VACUUM) then records
    pages with no live row in them."""
    with connection.cursor() as cursor:
        insert_ready(cursor, BURST, prefix="drained")
        analyze(cursor)
        cursor.execute(
            "UPDATE jobs_job SET state = 'done', finished_at = %s, lease_expires_at = NULL",
            [T0],
        )
        cursor.execute("DELETE FROM jobs_job")
        analyze(cursor)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "dead rows only")
        insert_ready(cursor, BURST)
        assert_ready_rows_come_in_claim_order(runner_plans(cursor), "dead rows, a burst")


def test_a_claim_under_kinds_caps_reads_a_burst_from_the_ready_index_and_ranks_only_its_rows():
    """The capped claim (a kind under its concurrency limit) keeps the plain
    claim's reading; it only ranks the rows it locked, per kind."""
    with connection.cursor() as cursor:
        assert_ready_rows_come_in_claim_order(
            runner_plans(cursor, CAPPED_STATEMENTS), "capped, never analyzed, empty"
        )
        insert_ready(cursor, BURST)
        assert_ready_rows_come_in_claim_order(
            runner_plans(cursor, CAPPED_STATEMENTS), "capped, a burst"
        )


@contextlib.contextmanager
def plans_the_server_ran() -> Iterator[list[str]]:
    """The plan of each statement run on this connection inside, as the server
    ran it: auto_explain's, sent to this client as a notice. Its settings last
    for this test's transaction only."""
    plans: list[str] = []

    def heard(diagnostic: Any) -> None:
        plans.append(diagnostic.message_primary or "")

    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        cursor.execute("SET LOCAL auto_explain.log_min_duration = 0")
        cursor.execute("SET LOCAL auto_explain.log_level = 'notice'")
    raw = connection.connection
    raw.add_notice_handler(heard)
    try:
        yield plans
    finally:
        raw.remove_notice_handler(heard)


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "unprepared"])
def test_the_runners_own_pass_reads_a_burst_from_the_ready_index_with_its_settings_sent_alongside(
    settings, prepared
):
    """The settings are made for the pass's own transaction, in the same round
    trip (`driver.fetch`): the plan the server ran for the store's real claim
    and pass, prepared (a generic plan) or not (planned at each execution)."""
    settings.JOBS_PREPARED_STATEMENTS = prepared
    store = for_database()
    with connection.cursor() as cursor:
        analyze(cursor)  # the statistics say the table is empty
        insert_ready(cursor, BURST)
    with plans_the_server_ran() as plans:
        claimed = store.claim(Admission(T0, {KIND: LEASE}, 8))
        store.settle_and_claim(
            [(claim.job, None) for claim in claimed], Admission(T0, {KIND: LEASE}, 8)
        )
    ran = [plan for plan in plans if "jobs_job_ready" in plan]  # not the settings' own
    assert len(ran) == 2, f"the claim's and the pass's plans were heard:\n{plans}"
    assert_ready_rows_come_in_claim_order(
        {"claim": ran[0], "settle_and_claim": ran[1]},
        "the store's own statements after a burst",
        generic=prepared,
    )
