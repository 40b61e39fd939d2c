"""Setting the stage: writing rows in bulk, clearing them, and putting the
table's statistics into a known state. Never what is measured.

Rows are generated inside the database with vendor SQL (PostgreSQL, SQLite),
so a backlog of 20,000 or a history of a million costs a statement, not a
Python loop; elsewhere (MySQL/MariaDB) the ORM's `bulk_create` writes them.
Which clean-up a part uses is part of its setup and its label: the as-met
parts only delete, as a user's table is never vacuumed by hand; the
favourable ones vacuum and analyze as the old benchmark did.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from acmeproxy.benchmarks.jobs import PREFIX, payload
from jobs.config import DEFAULTS, KEYS
from jobs.models import Job, JobsConfig
from jobs.wakeup import wake_runners


def clean() -> None:
    """Delete every bench row and nothing more: the as-met parts' setup.
    Without autovacuum the dead rows stay, as they would between its visits."""
    Job.objects.filter(kind__startswith=PREFIX).delete()


def clean_and_vacuum(*, compact: bool = False) -> None:
    """Delete the bench rows, then on PostgreSQL VACUUM ANALYZE the table, so a
    favourable part starts from its steady state. `compact` rewrites table and
    indexes (VACUUM FULL): after scale's million rows a plain VACUUM leaves
    tens of MB of index for the next run to insert into."""
    clean()
    if connection.vendor == "postgresql" and connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute("VACUUM FULL ANALYZE jobs_job" if compact else "VACUUM ANALYZE jobs_job")


def analyze() -> None:
    """Refresh the planner's statistics of the job table where there are any."""
    statement = {
        "postgresql": "ANALYZE jobs_job",
        "sqlite": "ANALYZE jobs_job",
        "mysql": "ANALYZE TABLE jobs_job",
    }.get(connection.vendor)
    if statement:
        with connection.cursor() as cursor:
            cursor.execute(statement)
            if connection.vendor == "mysql":
                cursor.fetchall()


def planned_rows() -> int | None:
    """How many rows PostgreSQL's statistics say the job table holds (None:
    never analyzed, or not PostgreSQL); shown beside each as-met drain, since
    with autovacuum off it is whatever the last ANALYZE saw."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = 'jobs_job'::regclass")
        row = cursor.fetchone()
    return None if row is None or row[0] < 0 else int(row[0])


@contextmanager
def config(**values: int) -> Iterator[None]:
    """The config row at the defaults overridden by `values`, restored afterwards."""
    row = JobsConfig.load()
    saved = {name: getattr(row, name) for name in KEYS}
    for name in KEYS:
        setattr(row, name, values.get(name, getattr(DEFAULTS, name)))
    row.save()
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(row, name, value)
        row.save()


def backlog(kind: str, count: int, *, with_payload: bool = True, analyzed: bool = False) -> None:
    """`count` ready rows of `kind`, committed together and announced to the
    runners as an `enqueue_many` would announce them: the burst that arrives
    after an outage. `analyzed` runs ANALYZE inside the same transaction, so
    the statistics count the rows before any runner can see them (PostgreSQL
    counts its own transaction's inserts as live)."""
    with transaction.atomic():
        insert_ready(kind, count, with_payload=with_payload)
        if analyzed:
            analyze()
        wake_runners()


def insert_ready(kind: str, count: int, *, with_payload: bool = True, prefix: str = "") -> None:
    """`count` rows of `kind` ready a second ago, keys `prefix0`..., with the
    bench payload or an empty one; no wake-up."""
    statement = READY_SQL.get(connection.vendor)
    if statement is None:
        _bulk_create_ready(kind, count, with_payload=with_payload, prefix=prefix)
        return
    shape = PAYLOAD_SQL[connection.vendor] if with_payload else "'{}'"
    with connection.cursor() as cursor:
        cursor.execute(statement.format(payload=shape), [kind, prefix, count])


def _bulk_create_ready(kind: str, count: int, *, with_payload: bool, prefix: str) -> None:
    now = timezone.now() - timedelta(seconds=1)
    batch: list[Job] = []
    for n in range(1, count + 1):
        body: dict[str, Any] = payload(n) if with_payload else {}
        batch.append(Job(kind=kind, key=f"{prefix}{n}", payload=body, max_attempts=5, run_at=now))
        if len(batch) == 5_000:
            Job.objects.bulk_create(batch)
            batch = []
    Job.objects.bulk_create(batch)


def history(kind: str, settled: int, future: int) -> None:
    """`settled` rows done a day ago and `future` rows queued a month out."""
    statements = HISTORY_SQL.get(connection.vendor)
    if statements is None:
        raise NotImplementedError(f"no history generator for {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(statements[0], [kind, settled])
        cursor.execute(statements[1], [kind, future])


#: The bench payload, {"subject": 4242, "i": n, "tenant": "acme"}, built in SQL.
PAYLOAD_SQL = {
    "postgresql": "jsonb_build_object('subject', 4242, 'i', n, 'tenant', 'acme')",
    "sqlite": "json_object('subject', 4242, 'i', n, 'tenant', 'acme')",
}

#: Per vendor: rows of kind %s with keys %s || n for n in 1..%s, ready a second ago.
READY_SQL = {
    "postgresql": """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at)
        SELECT gen_random_uuid(), %s, %s || n, {payload}, 'queued', 0, 5,
               now() - interval '1 second', '', now(), now()
        FROM generate_series(1, %s) AS n
    """,
    "sqlite": """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at)
        SELECT lower(hex(randomblob(16))), k.kind, k.prefix || n, {payload}, 'queued', 0, 5,
               strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-1 second'), '',
               strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'),
               strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')
        FROM (SELECT %s AS kind, %s AS prefix) AS k,
             (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %s)
              SELECT n FROM s)
    """,
}

#: Per vendor: kind %s rows, %s of them settled `done` a day ago; then %s
#: queued a month out, across 10 queues and 21 priorities from -100 to 100
#: (the ready rows a claim takes are at priority 0, below half of them).
HISTORY_SQL = {
    "postgresql": (
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, finished_at)
        SELECT gen_random_uuid(), %s, 's' || n, '{}', 'done', 1, 5,
               now() - interval '1 day', '', now(), now(), now() - interval '1 day'
        FROM generate_series(1, %s) AS n
        """,
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, queue, priority)
        SELECT gen_random_uuid(), %s, 'f' || n, '{}', 'queued', 0, 5,
               now() + interval '30 days', '', now(), now(),
               'q' || (n %% 10), (n %% 21) * 10 - 100
        FROM generate_series(1, %s) AS n
        """,
    ),
    "sqlite": (
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, finished_at)
        SELECT lower(hex(randomblob(16))), k.kind, 's' || n, '{}', 'done', 1, 5,
               datetime('now', '-1 day'), '', datetime('now'), datetime('now'),
               datetime('now', '-1 day')
        FROM (SELECT %s AS kind) AS k,
             (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %s)
              SELECT n FROM s)
        """,
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, queue, priority)
        SELECT lower(hex(randomblob(16))), k.kind, 'f' || n, '{}', 'queued', 0, 5,
               datetime('now', '+30 days'), '', datetime('now'), datetime('now'),
               'q' || (n %% 10), (n %% 21) * 10 - 100
        FROM (SELECT %s AS kind) AS k,
             (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %s)
              SELECT n FROM s)
        """,
    ),
}
