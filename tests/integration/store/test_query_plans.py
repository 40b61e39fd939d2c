"""The claim's plan on each database: it reads ready rows through its index, and on
PostgreSQL rewrites each row in place and is prepared once per connection."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from jobs.models import Job, State
from jobs.store import mysql as mysql_store
from jobs.store import sqlite as sqlite_store
from jobs.store.postgresql import sql as pg_sql
from tests.integration.store.support import KIND, LEASE, T0, live, queue, settled_row

pytestmark = pytest.mark.django_db


only_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="about SQLite's query plan; runs on SQLite"
)
only_mysql = pytest.mark.skipif(
    connection.vendor != "mysql", reason="about MySQL's query plan; runs on MySQL/MariaDB"
)


@pytest.mark.postgresql
def test_the_postgresql_claim_finds_ready_rows_through_the_jobs_job_ready_index(store):
    """A million settled rows must not slow the claim: they never enter the partial index."""
    settled = [
        Job(
            kind=KIND,
            key=f"settled{n}",
            state=State.DONE,
            attempts=1,
            max_attempts=5,
            run_at=T0 - timedelta(days=1, seconds=n),
            finished_at=T0 - timedelta(days=1),
        )
        for n in range(20_000)
    ]
    Job.objects.bulk_create(settled, batch_size=5_000)
    for n in range(5):
        queue(f"ready{n}", run_at=T0 - timedelta(minutes=n))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
        params: dict[str, Any] = {
            "now": T0,
            "kinds": [KIND],
            "expires": [T0 + LEASE],
            "limit": 8,
        }
        cursor.execute("EXPLAIN " + pg_sql.CLAIM_SQL, params)
        plan = "\n".join(line for (line,) in cursor.fetchall())

    assert "jobs_job_ready" in plan, f"the claim reads ready rows from the index:\n{plan}"
    assert live(KIND, "ready0").attempts == 0, "EXPLAIN claimed nothing"


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
        assert len(store.claim(T0, {KIND: LEASE}, 8)) == 8
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


@only_sqlite
def test_the_sqlite_claim_finds_ready_rows_through_the_jobs_job_ready_index(store):
    """Django never runs ANALYZE, so the plan must be right on a database without statistics.

    Any other plan reads every live row of the handled kinds and sorts them, under
    the write lock, on every claim: cost grows with the backlog instead of the limit.
    """
    settled_row("settled", T0 - timedelta(days=1))
    queue("ready")
    at = store.prepare("run_at", T0)
    sql = sqlite_store.SELECT_READY_SQL.format(kinds="%s")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, [at, KIND, at, 8])
        plan = "\n".join(str(line[-1]) for line in cursor.fetchall())

    assert "jobs_job_ready" in plan, f"the claim reads ready rows from the index:\n{plan}"


@only_mysql
@pytest.mark.django_db(transaction=True)  # ANALYZE TABLE commits implicitly
def test_the_mysql_claim_finds_ready_rows_through_the_live_state_index(store):
    """MySQL has no partial index: the claim's range must still skip settled rows."""
    settled = [
        Job(
            kind=KIND,
            key=f"settled{n}",
            state=State.DONE,
            attempts=1,
            max_attempts=5,
            run_at=T0 - timedelta(days=1, seconds=n),
            finished_at=T0 - timedelta(days=1),
        )
        for n in range(20_000)
    ]
    Job.objects.bulk_create(settled, batch_size=5_000)
    for n in range(5):
        queue(f"ready{n}", run_at=T0 - timedelta(minutes=n))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE TABLE jobs_job")
        cursor.fetchall()
        sql = mysql_store.SELECT_READY_SQL.format(kinds="%s")
        at = store.prepare("run_at", T0)
        cursor.execute("EXPLAIN " + sql, [at, KIND, at, 8])
        columns = [column[0] for column in cursor.description]
        plan = [dict(zip(columns, line, strict=True)) for line in cursor.fetchall()]

    assert plan[0]["key"] == "jobs_job_ready_by_state", f"the claim reads the index:\n{plan}"


def _prepared_claims() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%FOR UPDATE SKIP LOCKED%"],
        )
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)  # to start a new session
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "not-prepared"])
def test_the_postgresql_claim_is_prepared_once_per_connection_unless_settings_say_not(
    store, settings, prepared
):
    """Planning was ~40% of a small pass; a pooler that cannot keep prepared
    statements needs a way to turn them off."""
    settings.JOBS_PREPARED_STATEMENTS = prepared
    connection.close()  # a fresh session, with no statement prepared yet
    for n in range(3):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=n))

    for _ in range(3):
        store.claim(T0, {KIND: LEASE}, 1)

    assert _prepared_claims() == (1 if prepared else 0)
    assert Job.objects.filter(state=State.RUNNING).count() == 3, "every claim still claimed"
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        (mode,) = cursor.fetchone()
    assert mode == ("force_generic_plan" if prepared else "auto"), (
        "a prepared claim is planned once, not at every execution"
    )
