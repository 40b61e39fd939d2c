"""The raw loops: the same database work as the queue's, from a bare loop with
no queue code around it, measured in the same run so each of our figures can
be read as a fraction of what this machine and database allow right now.

PostgreSQL only: the loops are psycopg and `FOR UPDATE SKIP LOCKED` against
PostgreSQL's own statements (the store's INSERT and its multi-row INSERT,
imported, not copied). On SQLite and MySQL/MariaDB each says it was skipped.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.measure import RAW, Result, per_second
from acmeproxy.benchmarks.jobs import NOOP, payload

ONLY_POSTGRESQL = "PostgreSQL only: a bare psycopg loop with PostgreSQL's statements"


def _skipped(key: str, label: str) -> Result | None:
    if connection.vendor == "postgresql":
        return None
    return Result(key, label, RAW, skipped=ONLY_POSTGRESQL)


def batch_loop(count: int) -> Result:
    """Claim 100 with SKIP LOCKED, settle them in a second statement, until none
    are left: the ceiling for any drain on this machine."""
    key, label = "ceiling.batch", "raw SKIP LOCKED batch loop (claim 100, settle 100)"
    if skip := _skipped(key, label):
        return skip
    with connection.cursor() as cursor:
        cursor.execute(CEILING_SETUP_SQL, [count])
    claimed = 0
    started = time.perf_counter()
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(CEILING_CLAIM_SQL)
            ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            break
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(CEILING_SETTLE_SQL, [ids])
        claimed += len(ids)
    elapsed = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_ceiling")
    return Result(
        key, label, RAW, {"jobs": claimed, "jobs_per_second": per_second(claimed, elapsed)}
    )


def per_pass_loop(count: int, batch: int = 8) -> Result:
    """Each statement settles the previous `batch` and claims the next, as a
    runner's pass does with 8 slots: the ceiling at the default config's grain."""
    key = "ceiling.per_pass"
    label = f"raw settle-and-claim loop, {batch} per statement"
    if skip := _skipped(key, label):
        return skip
    with connection.cursor() as cursor:
        cursor.execute(CEILING_SETUP_SQL, [count])
    settled = 0
    ids: list[int] = []
    started = time.perf_counter()
    while True:
        with connection.cursor() as cursor:
            cursor.execute(CEILING_PASS_SQL, [ids, batch])
            ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            break
        settled += len(ids)
    elapsed = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_ceiling")
    return Result(
        key, label, RAW, {"jobs": settled, "jobs_per_second": per_second(settled, elapsed)}
    )


def _raw_connection() -> Any:
    import psycopg

    from jobs.store.postgresql import driver

    return psycopg.connect(**driver.plain_connection_params(connection), autocommit=True)


def insert_loop(count: int, *, with_payload: bool = True) -> Result:
    """The store's INSERT (with its NOTIFY), one per transaction, from a bare
    psycopg connection: what `enqueue` would cost with no queue code."""
    key = "raw.enqueue" if with_payload else "raw.enqueue_empty"
    label = "raw psycopg loop: the same INSERT and commit" + (
        "" if with_payload else ", empty payload"
    )
    if skip := _skipped(key, label):
        return skip
    from psycopg.types.json import Jsonb

    from jobs.store.postgresql import sql

    stage.clean()
    now = timezone.now()
    with _raw_connection() as raw:
        started = time.perf_counter()
        for n in range(count):
            body = Jsonb(payload(n) if with_payload else {})
            row = [
                uuid.uuid4(),
                NOOP,
                f"r{n}",
                body,
                None,
                5,
                now,
                None,
                "default",
                0,
                now,
                now,
                None,
            ]
            raw.execute(sql.INSERT_SQL, row, prepare=True).fetchall()
        elapsed = time.perf_counter() - started
    stage.clean()
    return Result(key, label, RAW, {"jobs": count, "jobs_per_second": per_second(count, elapsed)})


def insert_many_statement(count: int, *, with_payload: bool = True) -> Result:
    """The `enqueue_many` statement alone, all `count` rows in one, parameters
    prepared beforehand."""
    key = "raw.enqueue_many" if with_payload else "raw.enqueue_many_empty"
    label = "raw multi-row INSERT (the enqueue_many statement alone)" + (
        "" if with_payload else ", empty payloads"
    )
    if skip := _skipped(key, label):
        return skip
    from psycopg.types.json import Jsonb

    from jobs.store.postgresql import sql

    stage.clean()
    now = timezone.now()
    arrays = [
        [NOOP] * count,
        [f"b{n}" for n in range(count)],
        [Jsonb(payload(n) if with_payload else {}) for n in range(count)],
        [None] * count,
        [now] * count,
        [None] * count,
        ["default"] * count,
        [0] * count,
        [None] * count,  # traceparent: queued outside any trace
    ]
    with _raw_connection() as raw:
        started = time.perf_counter()
        raw.execute(sql.INSERT_MANY_SQL, [5, now, now, *arrays]).fetchall()
        elapsed = time.perf_counter() - started
    stage.clean()
    return Result(key, label, RAW, {"jobs": count, "jobs_per_second": per_second(count, elapsed)})


#: A scratch table shaped like the ready part of jobs_job.
CEILING_SETUP_SQL = """
    DROP TABLE IF EXISTS bench_ceiling;
    CREATE TABLE bench_ceiling (
        id bigserial PRIMARY KEY, state text NOT NULL, run_at timestamptz NOT NULL
    );
    CREATE INDEX bench_ceiling_ready ON bench_ceiling (run_at) WHERE state = 'queued';
    INSERT INTO bench_ceiling (state, run_at) SELECT 'queued', now() FROM generate_series(1, %s);
    ANALYZE bench_ceiling;
"""
CEILING_CLAIM_SQL = """
    UPDATE bench_ceiling SET state = 'running'
    WHERE id IN (SELECT id FROM bench_ceiling WHERE state = 'queued' AND run_at <= now()
                 ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED)
    RETURNING id
"""
CEILING_SETTLE_SQL = "UPDATE bench_ceiling SET state = 'done' WHERE id = ANY(%s)"
CEILING_PASS_SQL = """
    WITH settled AS (
        UPDATE bench_ceiling SET state = 'done' WHERE id = ANY(%s::bigint[]) RETURNING id
    )
    UPDATE bench_ceiling SET state = 'running'
    WHERE id IN (SELECT id FROM bench_ceiling WHERE state = 'queued' AND run_at <= now()
                 ORDER BY run_at LIMIT %s FOR UPDATE SKIP LOCKED)
    RETURNING id
"""
