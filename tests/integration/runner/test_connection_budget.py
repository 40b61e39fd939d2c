"""A runner's connection budget: what it needs, what the server has room for,
and what its worker threads do when the two do not meet
(`jobs.runner.connection_budget`, `jobs.runner.pool`).

The server's limits are read for real; a budget past them is made by asking
for more slots than the server has connections (`max_concurrent` 1,000). The
processes' own connections are counted in tests/faults/test_connections.py.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import OperationalError, connection, connections
from freezegun import freeze_time

from jobs import JobSpec, notifier
from jobs.queue import enqueue_many
from jobs.runner import connection_budget, pool
from jobs.store import for_database
from tests.helpers import wait_until
from tests.integration.runner.support import T0, WAIT, Blocks, events, install

pytestmark = pytest.mark.django_db(transaction=True)

on_a_server = pytest.mark.skipif(
    connection.vendor == "sqlite", reason="about a database server's connections; runs on one"
)
only_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="about SQLite, which has no server; runs on SQLite"
)
only_mysql = pytest.mark.skipif(
    connection.vendor != "mysql", reason="about MySQL and MariaDB; runs on MariaDB"
)


@pytest.fixture(autouse=True)
def connections_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker threads keep their connections, as in a process with room; put back after."""
    monkeypatch.setattr(pool, "_hand_back", threading.Event())
    monkeypatch.setattr(pool, "_gate", None)
    monkeypatch.setattr(connection_budget, "_refusal_logged", threading.Event())


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """An event's fields, as `jobs.log.event` attached them."""
    found: dict[str, Any] = vars(record)["fields"]
    return found


def test_a_process_needs_a_connection_per_slot_and_per_lane_its_loop_and_its_listener():
    assert connection_budget.needed(8, 1, listens=True, metrics=False) == 11
    assert connection_budget.needed(8, 2, listens=True, metrics=False) == 14
    assert connection_budget.needed(8, 2, listens=False, metrics=True) == 13


@on_a_server
def test_a_runner_that_fits_says_what_it_needs_and_keeps_its_connections(caplog, configure):
    configure(max_concurrent=8)

    room = connection_budget.check("default", lanes=1, burst=False, metrics=False)

    (said,) = events(caplog, "runner_connection_budget")
    listens = notifier.for_database().wakes_other_processes
    assert fields(said)["outcome"] == "fits"
    assert fields(said)["needed"] == (11 if listens else 10)
    assert room is not None
    assert room >= fields(said)["needed"]
    server = for_database().connection_room()
    assert server is not None
    assert fields(said)["max_connections"] == server.max_connections
    assert not pool.handing_back(), "worker threads keep their connections"


@on_a_server
def test_a_runner_needing_more_than_the_server_has_is_warned_and_its_threads_take_turns(
    caplog, configure
):
    configure(max_concurrent=1_000)

    room = connection_budget.check("default", lanes=2, burst=True, metrics=False)

    (said,) = events(caplog, "runner_connection_budget")
    told = fields(said)
    assert said.levelname == "WARNING"
    assert told["outcome"] == "short"
    assert told["needed"] == 1_004, (
        "a slot each, and each lane's loop and heartbeat (a burst does not listen)"
    )
    assert room is not None
    assert told["room"] == room
    assert told["limited_by"].startswith("max_connections")
    assert f"Raise max_connections by {1_004 - room}" in told["reason"], told["reason"]
    assert pool.handing_back(), "worker threads hand their connections back"
    assert pool._gate is not None, "and as many run at once as have connections"


@only_sqlite
def test_on_sqlite_there_is_no_server_whose_connections_to_count(caplog, configure):
    assert connection_budget.check("default", lanes=1, burst=False, metrics=False) is None
    assert not events(caplog, "runner_connection_budget")


@pytest.mark.postgresql
def test_postgresql_refusing_a_connection_for_want_of_room_is_told_from_other_errors():
    """The refusal comes before the session exists, with no SQLSTATE: a role
    with `CONNECTION LIMIT 0` is refused every one."""
    store = for_database()
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE jobs_no_room LOGIN CONNECTION LIMIT 0")
    try:
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(host="127.0.0.1", port=5432, user="jobs_no_room", dbname="postgres")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP ROLE jobs_no_room")

    assert store.out_of_connections(refused.value)
    wrapped = OperationalError(str(refused.value))
    wrapped.__cause__ = refused.value
    assert store.out_of_connections(wrapped), "Django's error made from it"
    assert not store.out_of_connections(psycopg.OperationalError("server closed the connection"))


@only_mysql
def test_mysql_refusing_a_connection_for_want_of_room_is_told_from_other_errors():
    import MySQLdb  # type: ignore[import-untyped]

    store = for_database()
    with connection.cursor() as cursor:
        cursor.execute("CREATE USER 'jobs_no_room'@'%' WITH MAX_USER_CONNECTIONS 1")
    try:
        first = MySQLdb.connect(host="127.0.0.1", port=3306, user="jobs_no_room")
        try:
            with pytest.raises(MySQLdb.OperationalError) as refused:
                MySQLdb.connect(host="127.0.0.1", port=3306, user="jobs_no_room")
        finally:
            first.close()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP USER 'jobs_no_room'@'%'")

    assert store.out_of_connections(refused.value), refused.value
    assert not store.out_of_connections(MySQLdb.OperationalError(2006, "server has gone away"))


@on_a_server
def test_a_handler_refused_a_connection_makes_every_worker_thread_hand_its_connection_back(
    caplog,
):
    """As a handler's query meets it: Django's error, made from the driver's."""
    store = for_database()
    refusal = OperationalError('FATAL:  too many connections for role "app"')
    refusal.__cause__ = (
        psycopg.OperationalError(str(refusal))
        if connection.vendor == "postgresql"
        else OperationalError(1040, "Too many connections")
    )

    connection_budget.handler_failed(store, refusal)
    connection_budget.handler_failed(store, refusal)

    assert pool.handing_back()
    (said,) = events(caplog, "runner_connection_budget")  # once a process
    assert fields(said)["outcome"] == "refused"


def test_a_worker_thread_handing_back_closes_its_connections_after_each_item():
    """Kept, a thread's connection is the same from one item to the next;
    handed back, each item finds it closed, and opens its own."""
    seen: list[object] = []
    ran = threading.Semaphore(0)

    def work(item: int) -> None:
        seen.append(connections["default"].connection)
        connections["default"].ensure_connection()
        ran.release()

    workers: pool.WorkerPool[int] = pool.WorkerPool(work, name="handing-back")
    try:
        for item in range(2):
            workers.submit(item)
            assert ran.acquire(timeout=WAIT)
        pool.hand_back_connections()
        for item in range(2, 4):
            workers.submit(item)
            assert ran.acquire(timeout=WAIT)
    finally:
        workers.close()

    assert seen[0] is None, "the thread's first item opens its connection"
    assert seen[1] is not None, "kept for the next item"
    assert seen[3] is None, "handed back after each item"


def test_worker_threads_taking_turns_run_no_more_items_at_once_than_the_gate_allows():
    running = 0
    most = 0
    lock = threading.Lock()
    ran = threading.Semaphore(0)
    release = threading.Event()

    def work(item: int) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(WAIT)
        with lock:
            running -= 1
        ran.release()

    pool.hand_back_connections(at_most=2)
    workers: pool.WorkerPool[int] = pool.WorkerPool(work, name="turns")
    try:
        workers.submit_many(range(6))
        assert wait_until(lambda: most == 2, WAIT), "two run at once"
        release.set()
        for _ in range(6):
            assert ran.acquire(timeout=WAIT), "every item runs in its turn"
    finally:
        release.set()
        workers.close()
    assert most == 2


def test_a_worker_opens_its_connection_before_the_attempt_while_connections_are_handed_back():
    store = for_database()
    connections["default"].close()
    connection_budget.ready(store)
    assert connections["default"].connection is None, "kept: opened on first use"

    pool.hand_back_connections()
    connection_budget.ready(store)
    assert connections["default"].connection is not None, "handed back: opened before"


def test_an_attempt_timed_out_while_it_waited_its_turn_for_a_connection_is_never_run(
    registry, make_runner, configure
):
    """Room for one worker at a time: the second attempt's budget runs out while
    the first holds the turn. It is settled as timed out, and its handler is
    not called when its turn comes: the row may be another runner's by then."""
    configure(max_concurrent=2, max_attempts=5)

    class Short(Blocks):
        kind = "test.short"

        def budget(self) -> timedelta:
            return timedelta(seconds=1)

    handler = install(registry, Short)
    pool.hand_back_connections(at_most=1)
    runner = make_runner(registry=registry)
    try:
        with freeze_time(T0) as frozen:
            assert enqueue_many([JobSpec.now(Short.kind, key) for key in ("a", "b")])
            assert runner.run_pass() == (2, 2)
            assert handler.started.wait(WAIT), "one attempt runs"
            frozen.tick(timedelta(seconds=2))
            runner.run_pass()  # times both out
            assert runner.in_flight() == []
            handler.release.set()
            runner.close()  # joins the workers: the second has had its turn
    finally:
        handler.release.set()

    assert len(handler.runs) == 1, f"only the attempt that had its turn ran: {handler.runs}"
    assert handler.most_at_once == 1
