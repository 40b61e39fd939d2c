"""The claim's plan on SQLite and PostgreSQL (MySQL's is in test_claim_plans_mysql): it
reads ready rows through its index, and on PostgreSQL rewrites each row in place and
is prepared once per connection where that is safe."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from jobs.models import Job, State
from jobs.store import sqlite as sqlite_store
from jobs.store.admission import Admission
from jobs.store.postgresql import sql as pg_sql
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = pytest.mark.django_db


only_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="about SQLite's query plan; runs on SQLite"
)


@pytest.mark.postgresql
def test_a_postgresql_claim_rewrites_each_row_in_place_without_writing_an_index_entry(store):
    """Queued to running keeps `live`, the only column the partial indexes'
    conditions read, so each claimed row's new version is a HOT update: the
    claim adds nothing to the table's five indexes."""
    for n in range(8):
        queue(f"hot{n}", run_at=T0 - timedelta(seconds=n))

    with connection.cursor() as cursor:
        cursor.execute(HOT_UPDATES_SQL)
        (before,) = cursor.fetchone()
        assert len(store.claim(Admission(T0, {KIND: LEASE}, 8))) == 8
        cursor.execute(HOT_UPDATES_SQL)
        (after,) = cursor.fetchone()

    assert after - before == 8, "every claimed row was updated in place"


@pytest.mark.postgresql
def test_the_postgresql_jobs_table_leaves_a_fifth_of_each_page_for_claims(store):
    """Without room on its page, a claimed row's new version goes to another
    page, and that update writes an entry in every index after all."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'jobs_job'::regclass")
        (options,) = cursor.fetchone()

    assert "fillfactor=80" in (options or [])


#: Rows of jobs_job updated in place (HOT) by the current transaction.
HOT_UPDATES_SQL = "SELECT pg_stat_get_xact_tuples_hot_updated('jobs_job'::regclass)"


#: Settled rows enough that a plan reading them would show in a claim's cost.
MANY_SETTLED = 50_000

#: Ready rows arriving at once.
BURST = 5_000


@only_sqlite
@pytest.mark.parametrize(
    "statistics", ["none", "analyzed empty", "analyzed among many settled rows"]
)
def test_the_sqlite_claim_reads_ready_rows_from_their_index_in_order_whatever_sqlite_stat1_says(
    store, statistics
):
    """Django never runs ANALYZE, but an operator may, on any day. Any other plan
    reads every live row of the handled kinds and sorts them, under the write
    lock, on every claim: cost grows with the backlog instead of the limit.

    `+kind` in the claim is what holds it: without it, SQLite answered the
    kind filter from the identity index and sorted, with no statistics or
    with those of an empty table (measured on SQLite 3.40).
    """
    with connection.cursor() as cursor:
        # Dropped inside the test's transaction, which puts it back.
        cursor.execute("DROP TABLE IF EXISTS sqlite_stat1")
        if statistics == "analyzed empty":
            cursor.execute("ANALYZE jobs_job")
        elif statistics == "analyzed among many settled rows":
            _sqlite_rows(
                cursor, MANY_SETTLED, "done", store.prepare("run_at", T0 - timedelta(days=1))
            )
            _sqlite_rows(cursor, 20, "queued", store.prepare("run_at", T0))
            cursor.execute("ANALYZE jobs_job")
        _sqlite_rows(cursor, BURST, "queued", store.prepare("run_at", T0), prefix="burst")
        at = store.prepare("run_at", T0)
        sql = sqlite_store.SELECT_READY_SQL.format(kinds="%s", queues="")
        cursor.execute("EXPLAIN QUERY PLAN " + sql, [0, at, KIND, at, 8])
        plan = "\n".join(str(line[-1]) for line in cursor.fetchall())
        cursor.execute("EXPLAIN QUERY PLAN " + sqlite_store.NEXT_LEVEL_SQL, [100])
        levels = "\n".join(str(line[-1]) for line in cursor.fetchall())

    assert "USING INDEX jobs_job_ready (priority=? AND run_at<?)" in plan, (
        f"the claim reads one priority's ready rows as a range of the ready index:\n{plan}"
    )
    assert "TEMP B-TREE" not in plan, f"the index gives the order, nothing is sorted:\n{plan}"
    assert "INDEX jobs_job_ready (priority<?)" in levels, (
        f"the next priority is one descent of the ready index:\n{levels}"
    )
    assert "TEMP B-TREE" not in levels, levels


@only_sqlite
def test_an_sqlite_insert_or_change_of_state_builds_no_temporary_index():
    """The generated `live` column and the state check are evaluated at every
    insert and every change of state; SQLite builds a temporary index for an
    IN list of more than two constants each time, ~20,000 instructions a row
    (the runner's and enqueue's cost grew 5 % when `waiting` made `live`'s
    list three long). Both are written as equalities joined by OR."""
    statements = [
        "INSERT INTO jobs_job (id, kind, key, payload, state, attempts, max_attempts,"
        " run_at, last_error, created_at, updated_at, priority, queue)"
        " VALUES ('x', 'k', 'k', '{}', 'queued', 0, 3, '2026-01-01', '', '2026-01-01',"
        " '2026-01-01', 0, 'default')",
        "UPDATE jobs_job SET state = 'running' WHERE id = 'x'",
        "UPDATE jobs_job SET state = 'done' WHERE id = 'x'",
    ]
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute("EXPLAIN " + sql)
            opcodes = [row[1] for row in cursor.fetchall()]
            assert "OpenEphemeral" not in opcodes, sql


def _sqlite_rows(cursor: Any, count: int, state: str, at: Any, prefix: str = "") -> None:
    """`count` rows of KIND in `state`, run (and settled) at `at`; one statement."""
    cursor.execute(
        """
        WITH RECURSIVE n(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM n WHERE n < %s)
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, finished_at)
        SELECT lower(hex(randomblob(16))), %s, %s || n, '{}', %s, 0, 5, %s, '', %s, %s,
               CASE WHEN %s = 'done' THEN %s END
        FROM n
        """,
        [count, KIND, f"{prefix}{state}", state, at, at, at, state, at],
    )


def _prepared_claims() -> int:
    """The runner's statements prepared in this session (`_p<n>`) that take
    values: the claim (its settings take none; an enqueue's insert is `_<n>`)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements"
            " WHERE name ~ '^jobs_[0-9a-f]{12}_p' AND cardinality(parameter_types) > 0"
        )
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)  # to start a new session
@pytest.mark.parametrize(
    ("setting", "prepared"),
    [(True, True), (False, False), (None, True)],
    ids=["prepared", "not-prepared", "unset-on-a-direct-connection"],
)
def test_the_postgresql_claim_is_prepared_once_per_connection_unless_settings_say_not(
    store, settings, setting, prepared
):
    """Planning was ~40% of a small pass; a pooler that cannot keep prepared
    statements needs them off, and unset they are on only where the server is
    reached directly, as the test database is."""
    settings.JOBS_PREPARED_STATEMENTS = setting
    connection.close()  # a fresh session, with no statement prepared yet
    for n in range(3):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=n))

    for _ in range(3):
        store.claim(Admission(T0, {KIND: LEASE}, 1))

    assert _prepared_claims() == (1 if prepared else 0)
    assert Job.objects.filter(state=State.RUNNING).count() == 3, "every claim still claimed"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)  # to start a new session, and end transactions
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "not-prepared"])
def test_the_runners_planner_settings_end_with_the_transaction_of_its_pass(
    store, settings, prepared
):
    """Made for the pass's transaction only (`SET LOCAL`), never for the session:
    behind a transaction-mode pooler a session's settings reach every client
    the server connection serves next."""
    settings.JOBS_PREPARED_STATEMENTS = prepared
    connection.close()
    store.claim(Admission(T0, {KIND: LEASE}, 1))  # autocommit: the pass is a transaction of its own
    current, defaults = _planner_settings()
    assert current == defaults, "nothing is left on the session after the pass"

    with transaction.atomic():
        store.claim(Admission(T0, {KIND: LEASE}, 1))
        inside, _ = _planner_settings()
    after, _ = _planner_settings()

    assert inside == pg_sql.PLANNER_SETTINGS, "in force until the pass's transaction ends"
    assert after == defaults, "and undone when it does"


def _planner_settings() -> tuple[dict[str, str], dict[str, str]]:
    """The runner's planner settings as this session has them, and as it had them
    before anything set them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, setting, reset_val FROM pg_settings WHERE name = ANY(%s)",
            [list(pg_sql.PLANNER_SETTINGS)],
        )
        rows = cursor.fetchall()
    return {name: now for name, now, _ in rows}, {name: reset for name, _, reset in rows}


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)  # the pass in autocommit, as a runner sends it
def test_a_statement_after_the_runners_pass_on_its_connection_is_planned_as_the_server_would(
    store,
):
    """The pass's settings end with it: a statement that can only scan (the
    presence table's cleanup: no index on heartbeat_at) is not costed at the
    10^10 of a disabled scan, which once made it JIT-compiled at each
    execution, 15 to 90 ms for a few rows."""
    store.claim(Admission(T0, {KIND: LEASE}, 1))

    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN ANALYZE SELECT * FROM jobs_runnerprocess WHERE heartbeat_at < %s",
            [T0],
        )
        plan = "\n".join(line for (line,) in cursor.fetchall())

    assert "Seq Scan on jobs_runnerprocess" in plan, f"a scan is the only way here:\n{plan}"
    assert "cost=10000000000" not in plan, f"the scan is not disabled:\n{plan}"
    assert "JIT" not in plan, f"nothing is compiled for a few rows:\n{plan}"
