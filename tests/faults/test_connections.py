"""Connections: a runner with fewer than it needs, and a runner behind PgBouncer.

On the shared PostgreSQL (its settings are never touched): the starved runner
runs as a role of the test's own, created with a `CONNECTION LIMIT` below its
budget and dropped afterwards; the pooled one goes through a PgBouncer of the
test's own (`tests.faults.pgbouncer`) in transaction mode.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from jobs.store.postgresql import sql as pg_sql
from tests import helpers
from tests.conftest import ROOT
from tests.faults.books import (
    Books,
    audit,
    count_events,
    read_books,
    record_figures,
    settles_not_landed,
    stop,
    wait_until,
)
from tests.faults.pgbouncer import PgBouncer

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

#: PostgreSQL refusing a prepared statement's name, in whatever words it reached the log.
MIXED_UP = re.compile(r'prepared statement "[^"]*" (?:already exists|does not exist)|mixed_up')

#: The starved role's limit: a runner of 8 slots needs 11 (8 worker threads,
#: its loop, its heartbeat, its listener).
ROLE_LIMIT = 5


@pytest.fixture
def starved_role() -> Iterator[str]:
    """A login role of this test's own with `CONNECTION LIMIT ROLE_LIMIT`, allowed
    to read and write the test database's tables; dropped afterwards."""
    name = f"jobs_starved_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT {ROLE_LIMIT}")
        cursor.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {name}"
        )
        cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {name}")
    try:
        yield name
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                [name],
            )
            cursor.execute(f"DROP OWNED BY {name}")
            cursor.execute(f"DROP ROLE {name}")


@pytest.fixture
def pgbouncer(tmp_path: Path) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(tmp_path)
    yield bouncer
    bouncer.stop()


def as_role(role: str) -> dict[str, str]:
    """A runner's environment reaching the test database as `role`."""
    return {"DATABASE_URL": f"postgres://{role}@127.0.0.1:5432/{connection.settings_dict['NAME']}"}


def books(kinds: list[str]) -> Books:
    with connection.cursor() as cursor:
        return read_books(cursor, kinds)


def overlaps(found: Books) -> int:
    """Pairs of executions of one job that ran at the same time."""
    count = 0
    for runs in found.runs.values():
        for n, earlier in enumerate(runs):
            for later in runs[n + 1 :]:
                end = earlier.finished_at or datetime.max.replace(tzinfo=later.started_at.tzinfo)
                count += later.started_at < end
    return count


def test_a_runner_below_its_connection_budget_warns_at_start_and_still_loses_nothing(
    runjobs, configure, starved_role
):
    """8 slots for a role limited to 5 connections: the runner says at start what
    it needs and what it has, then runs as many attempts at once as it has
    connections for its worker threads (2), each thread handing its
    connection back after each attempt: no handler or settle is refused, so
    no attempt is taken for a dead runner's, no job is retired for attempts it
    never spent, and nothing is left running after SIGTERM."""
    configure(
        max_concurrent=8,
        poll_interval_ms=100,
        retry_base_seconds=0,
        retry_max_seconds=1,
        lease_seconds=3,
        heartbeat_seconds=1,
    )
    records = [JobSpec.now("test.record", f"record-{n}").with_max_attempts(25) for n in range(120)]
    sleeps = [
        JobSpec.now("test.sleep", f"sleep-{n}").with_payload({"seconds": 0.3}).with_max_attempts(25)
        for n in range(24)
    ]
    assert all(enqueue_many([*records, *sleeps])), "every job is queued"
    expected = set(
        Job.objects.filter(kind__in=["test.record", "test.sleep"]).values_list("id", flat=True)
    )
    started = time.monotonic()
    runner = runjobs(env={**as_role(starved_role), "TEST_SLEEP_LEASE": "30"})
    wait_until(
        lambda: (
            Job.objects.filter(state="done").count() == len(expected)
            or runner.process.poll() is not None
        ),
        90,
        "every job is done",
    )
    drained = time.monotonic() - started
    output = runner.output()
    assert stop(runner) == 0, f"the runner stops cleanly on SIGTERM:\n{runner.output()[-3000:]}"
    output = runner.output()

    found = books(["test.record", "test.sleep"])
    result = audit(found, expected, not_landed=settles_not_landed([output]))
    running_after = Job.objects.filter(state="running").count()
    refused = sum(
        1
        for line in output.splitlines()
        if " job_retry " in line and "too many connections" in line
    )
    record_figures(
        "connection starvation at start",
        load="120 quick and 24 0.3 s jobs, 1 runner x 8 slots",
        faults=f"the runner's role has CONNECTION LIMIT {ROLE_LIMIT}; it needs 11",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=overlaps(found),
        handler_queries_refused=refused,
        settles_failed=count_events([output], "job_settle_failed"),
        reclaimed=count_events([output], "job_reclaimed"),
        left_running_after_sigterm=running_after,
        drain_seconds=round(drained, 1),
    )
    first = next(line for line in output.splitlines() if "runner_connection_budget" in line)
    assert " WARNING jobs runner_connection_budget outcome=short " in first, (
        f"the runner warns at start:\n{first}"
    )
    assert "needed=11 room=5 max_connections=" in first, f"naming what it needs:\n{first}"
    assert "CONNECTION LIMIT" in first, f"and the limit in the way:\n{first}"
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
    assert overlaps(found) == 0, "no job ran twice at the same time"
    assert "attempts exhausted" not in output, "no job is retired for attempts it never spent"
    assert count_events([output], "job_reclaimed") == 0, (
        "no attempt is taken as if its runner had died"
    )
    assert running_after == 0, "no row is left running after a clean stop"
    assert refused == 0, "no handler is refused a connection: the others wait their turn"


def test_a_handler_refused_a_connection_mid_run_retries_and_the_retry_is_settled(
    runjobs, configure, starved_role
):
    """The server fills up after the runner started (another application takes
    every connection its role has left): each handler refused a connection
    ends in its Retry, whose settle gets a connection once one is free, never
    a row left to its lease as if its runner had died; from then on worker
    threads hand their connections back.

    Depends on the settles' bounded retry with backoff (branch h-settles): the
    Retry's settle, refused on the same thread a moment after its handler, is
    tried again once the other application lets go."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER ROLE {starved_role} CONNECTION LIMIT 13")  # the runner needs 11
    configure(max_concurrent=8, poll_interval_ms=100, retry_base_seconds=0, retry_max_seconds=1)
    runner = runjobs(env=as_role(starved_role))
    wait_until(lambda: "runner_listening" in runner.output(), 30, "the runner is up")
    blockers = take_every_connection_left(starved_role)
    try:
        assert all(enqueue_many([JobSpec.now("test.record", f"r{n}") for n in range(40)]))
        expected = set(Job.objects.filter(kind="test.record").values_list("id", flat=True))
        wait_until(
            lambda: "runner_connection_budget outcome=refused" in runner.output(),
            30,
            "a handler is refused a connection",
        )
    finally:
        for blocker in blockers:
            blocker.close()
    wait_until(
        lambda: Job.objects.filter(id__in=expected, state="done").count() == len(expected),
        60,
        "every job is done once connections are free again",
    )
    assert stop(runner) == 0, f"the runner stops cleanly:\n{runner.output()[-3000:]}"
    output = runner.output()
    found = books(["test.record"])
    result = audit(found, expected, not_landed=settles_not_landed([output]))
    retried = [
        line
        for line in output.splitlines()
        if " job_retry " in line and "too many connections" in line
    ]
    record_figures(
        "connections taken mid-run",
        load="40 quick jobs, 1 runner x 8 slots",
        faults="another client takes every connection the runner's role has left, then lets go",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=overlaps(found),
        handler_queries_refused=len(retried),
        settles_failed=count_events([output], "job_settle_failed"),
        reclaimed=count_events([output], "job_reclaimed"),
    )
    assert retried, "a handler's refused connection is its attempt's Retry, settled as such"
    assert count_events([output], "job_reclaimed") == 0, "no row is left as if its runner died"
    assert "attempts exhausted" not in output, "no job is retired for attempts it never spent"
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
    assert overlaps(found) == 0, "no job ran twice at the same time"
    assert Job.objects.filter(state="running").count() == 0, "nothing is left running"


def take_every_connection_left(role: str) -> list[psycopg.Connection]:
    """Connections as `role` until the server refuses one: another application's."""
    taken: list[psycopg.Connection] = []
    database = connection.settings_dict["NAME"]
    while len(taken) < 50:
        try:
            taken.append(psycopg.connect(host="127.0.0.1", port=5432, user=role, dbname=database))
        except psycopg.OperationalError as error:
            if "too many connections" not in str(error):
                raise
            return taken
    raise AssertionError("the role's limit was never reached")


def enqueue_through(bouncer: PgBouncer, count: int) -> subprocess.CompletedProcess[str]:
    """`count` single enqueues and one `enqueue_many` of `count`, each in its own
    transaction, from a process reaching the database through `bouncer`; it
    prints whether its statements are prepared there."""
    script = (
        "from django.db import connection\n"
        "from jobs import JobSpec\n"
        "from jobs.queue import enqueue, enqueue_many\n"
        "from jobs.store.postgresql import preparing\n"
        f"for n in range({count}):\n"
        "    enqueue(JobSpec.now('test.record', f'one-{n}'))\n"
        f"enqueue_many([JobSpec.now('test.record', f'many-{{n}}') for n in range({count})])\n"
        "print('prepared:', preparing.prepares(connection))\n"
    )
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", script],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": bouncer.url(connection.settings_dict["NAME"]),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_runner_and_an_enqueuer_behind_pgbouncer_in_transaction_mode_with_default_settings(
    runjobs, configure, pgbouncer
):
    """Debian's PgBouncer 1.18, one server connection for every client: with
    the default settings nothing is prepared there (the pooler is found at
    connect), so no statement name is ever met by another client's, every job
    runs once, and no setting of the runner's is left on the server session
    the next client gets."""
    configure(max_concurrent=8, poll_interval_ms=100)
    database = connection.settings_dict["NAME"]
    started = time.monotonic()
    runner = runjobs(env={"DATABASE_URL": pgbouncer.url(database)})
    wait_until(lambda: "runner_started" in runner.output(), 30, "the runner is up")
    enqueued = enqueue_through(pgbouncer, 100)
    assert enqueued.returncode == 0, f"enqueue through PgBouncer works:\n{enqueued.stderr}"
    assert "prepared: False" in enqueued.stdout, (
        "the enqueuer finds the pooler and prepares nothing"
    )
    expected = set(Job.objects.filter(kind="test.record").values_list("id", flat=True))
    assert len(expected) == 200, "every job is queued"
    wait_until(
        lambda: (
            Job.objects.filter(state="done").count() == len(expected)
            or runner.process.poll() is not None
        ),
        90,
        "every job is done",
    )
    drained = time.monotonic() - started
    assert stop(runner) == 0, f"the runner stops cleanly:\n{runner.output()[-3000:]}"
    output = runner.output()

    with pgbouncer.connect(database) as fresh, connection.cursor() as direct:
        seen = {
            name: fresh.execute(f"SHOW {name}").fetchone()[0] for name in pg_sql.PLANNER_SETTINGS
        }
        defaults = {}
        for name in pg_sql.PLANNER_SETTINGS:
            direct.execute(f"SHOW {name}")
            defaults[name] = direct.fetchone()[0]
    found = books(["test.record"])
    result = audit(found, expected, not_landed=settles_not_landed([output]))
    record_figures(
        "PgBouncer, transaction mode",
        load="100 enqueues and an enqueue_many of 100, 1 runner x 8 slots",
        faults="PgBouncer 1.18 in transaction mode, one server connection for every client",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=overlaps(found),
        prepared_statement_errors=len(MIXED_UP.findall(output + enqueued.stderr)),
        settings_left_on_the_session={k: v for k, v in seen.items() if v != defaults[k]},
        drain_seconds=round(drained, 1),
    )
    assert not MIXED_UP.search(output + enqueued.stderr), (
        f"no prepared statement is refused, nor bound to another's:\n{output[-3000:]}"
    )
    assert "jobs_prepared_statements outcome=off" in output, "the runner finds the pooler"
    assert not result.problems, "every job ran once:\n" + "\n".join(result.problems)
    assert seen == defaults, "a fresh client through the pooler meets the server's own settings"
    assert seen["enable_seqscan"] == "on", "no scan is left disabled"
    assert seen["plan_cache_mode"] == "auto", "no plan is forced generic"


def test_the_connection_budget_is_what_a_running_runner_holds_in_pg_stat_activity(
    runjobs, configure
):
    """Counted, not guessed: 8 slots and 2 lanes, each lane with its loop and
    its heartbeat and its listener, every worker thread inside a handler:
    8 + 2 x 3 = 14, as
    the budget check logs."""
    configure(max_concurrent=8, poll_interval_ms=100)
    assert all(
        enqueue_many(
            [JobSpec.now("test.sleep", f"s{n}").with_payload({"seconds": 5}) for n in range(8)]
        )
    )
    name = f"jobs-budget-{uuid.uuid4().hex[:8]}"
    url = f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}"
    runner = runjobs(
        "--lanes",
        "2",
        env={"DATABASE_URL": f"{url}?application_name={name}", "TEST_SLEEP_LEASE": "60"},
    )

    def held() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
            )
            return int(cursor.fetchone()[0])

    wait_until(lambda: Job.objects.filter(state="running").count() == 8, 30, "8 attempts run")
    wait_until(lambda: held() >= 14, 10, "every connection is open")
    more = helpers.wait_until(lambda: held() > 14, 1.0)
    counted = held()
    output = runner.output()
    stop(runner, timeout=30)
    assert counted == 14, f"the runner holds {counted} connections"
    assert not more, "and opens no more"
    assert "runner_connection_budget outcome=fits needed=14 " in output, output
