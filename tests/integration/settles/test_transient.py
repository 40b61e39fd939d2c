"""A settle that fails on a transient database error is tried again, a few times over
a few seconds, each try logged with what it cost; one refused for good is not; one
that never lands leaves its row to its lease, as before."""

from __future__ import annotations

import importlib
import os
import sqlite3
import threading
import time
from typing import Any

import psycopg
import pytest
from django.db import IntegrityError, OperationalError, connection
from freezegun import freeze_time

from jobs import Retry
from jobs.models import Job, State
from jobs.runner.settle_tries import PAUSES, QUIET_SECONDS, GaveUp, SettleTries
from jobs.store.postgresql import driver
from jobs.store.transient import transient
from tests.integration.runner.support import events
from tests.integration.settles.support import Bad, Good, fields, queue_mixed, rows

pytestmark = pytest.mark.django_db(transaction=True)

TRIES = len(PAUSES) + 1


def transient_error() -> OperationalError:
    """A transient error as Django raises it from the driver of the database under
    test: a serialization failure, a deadlock, a busy database."""
    cause: Exception
    if connection.vendor == "postgresql":
        cause = psycopg.errors.SerializationFailure("could not serialize access")
    elif connection.vendor == "mysql":
        mysqldb = importlib.import_module("MySQLdb")  # in requirements-mysql.txt only
        cause = mysqldb.OperationalError(1213, "Deadlock found when trying to get lock")
    else:
        cause = sqlite3.OperationalError("database is locked")
        cause.sqlite_errorcode = 5
    error = OperationalError(*cause.args)
    error.__cause__ = cause
    assert transient(error), "the store calls it transient"
    return error


def failing(real: Any, failures: list[Exception]) -> Any:
    """`real`, raising each of `failures` on its first calls, then answering."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop(0)
        return real(*args, **kwargs)

    return call


def failing_with_rows(real: Any, failures: list[Exception]) -> Any:
    """`real`, a verb whose first argument is rows to settle, raising each of
    `failures` on its first calls given any (a pass's batch), then answering."""

    def call(done: Any, *args: Any) -> Any:
        if done and failures:
            raise failures.pop(0)
        return real(done, *args)

    return call


@pytest.fixture
def closes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each connection closed between tries, by its alias."""
    closed: list[str] = []
    original = SettleTries._close

    def close(self: SettleTries) -> None:
        closed.append(self.using)
        original(self)

    monkeypatch.setattr(SettleTries, "_close", close)
    return closed


def test_a_retry_whose_settle_fails_on_a_transient_error_lands_on_the_next_try(
    bad, registry, make_runner, caplog, no_pauses, closes
):
    bad.ends = lambda: Retry("the upstream answered 503")
    runner = make_runner(registry=registry)
    runner.store.retry = failing(runner.store.retry, [transient_error()])
    queue_mixed(0, ["bad"])
    runner.drain()

    job = rows(Bad.kind)["bad"]
    assert (job.state, job.attempts) == (State.QUEUED, 1), "the retry landed"
    assert job.last_error == "the upstream answered 503"
    retried = events(caplog, "job_settle_retried")
    assert len(retried) == 1, "the failed try is logged once"
    said = fields(retried[0])
    assert (said["tried"], said["tries"], said["settle"]) == (1, TRIES, "settle")
    assert said["try_ms"] >= 0, "with what the failed try cost"
    assert said["pause_ms"] > 0, "and the pause before the next"
    assert closes == ["default"], "the thread's connection was closed before the next try"
    assert len(no_pauses) == 1, "one pause"
    assert PAUSES[0] / 2 <= no_pauses[0] <= PAUSES[0] * 1.5, "the first, jittered"
    recovered = events(caplog, "job_settle_recovered")
    assert len(recovered) == 1
    assert fields(recovered[0])["tries"] == 2
    assert not events(caplog, "job_settle_failed")


def test_a_settle_that_fails_on_every_try_is_logged_failed_and_left_to_its_lease(
    bad, registry, make_runner, caplog, no_pauses
):
    bad.ends = lambda: Retry("the upstream answered 503")
    runner = make_runner(registry=registry)
    runner.store.retry = failing(runner.store.retry, [transient_error() for _ in range(TRIES)])
    queue_mixed(0, ["bad"])
    runner.drain()

    job = rows(Bad.kind)["bad"]
    assert job.state == State.RUNNING, "the row is left to its lease"
    assert len(no_pauses) == len(PAUSES), "every pause was waited, and no more"
    assert sum(no_pauses) < 5, "a few seconds in all"
    assert len(events(caplog, "job_settle_retried")) == TRIES - 1
    failed = events(caplog, "job_settle_failed")
    assert len(failed) == 1, "given up once"
    assert fields(failed[0])["tries"] == TRIES, "saying after how many tries"


def test_a_settle_refused_for_good_is_not_tried_again(
    bad, registry, make_runner, caplog, no_pauses
):
    bad.ends = lambda: Retry("the upstream answered 503")
    runner = make_runner(registry=registry)
    refused = IntegrityError("a constraint refused the row")
    runner.store.retry = failing(runner.store.retry, [refused])
    queue_mixed(0, ["bad"])
    runner.drain()

    assert not events(caplog, "job_settle_retried"), "no second try"
    assert no_pauses == [], "and no pause"
    failed = events(caplog, "job_settle_failed")
    assert len(failed) == 1
    assert fields(failed[0])["tries"] == 1


def test_a_batch_that_fails_on_a_transient_error_lands_whole_on_the_next_try(
    good, registry, make_runner, caplog, no_pauses
):
    runner = make_runner(registry=registry)
    runner.store.settle_and_claim = failing_with_rows(
        runner.store.settle_and_claim, [transient_error()]
    )
    queue_mixed(6, [])
    runner.drain()

    assert sorted(good.runs) == sorted((f"good-{n}", 1) for n in range(6)), "each ran once"
    assert {row.state for row in rows(Good.kind).values()} == {State.DONE}
    assert not events(caplog, "job_batch_settle_failed"), "no row was settled alone"
    (retried,) = events(caplog, "job_settle_retried")
    said = fields(retried)
    assert (said["settle"], said["tried"]) == ("done", 1), "the batch's try is logged"
    assert said["rows"] > 0, "saying how many rows it held"
    assert len(no_pauses) == 1, "after one pause"
    (recovered,) = events(caplog, "job_settle_recovered")
    assert (fields(recovered)["tries"], fields(recovered)["rows"]) == (2, said["rows"])
    assert not events(caplog, "job_settle_failed")


def test_a_batch_that_fails_on_every_try_settles_its_rows_alone(
    good, registry, make_runner, caplog, no_pauses
):
    runner = make_runner(registry=registry)
    runner.store.settle_and_claim = failing_with_rows(
        runner.store.settle_and_claim, [transient_error() for _ in range(TRIES)]
    )
    queue_mixed(6, [])
    runner.drain()

    assert sorted(good.runs) == sorted((f"good-{n}", 1) for n in range(6)), "each ran once"
    assert {row.state for row in rows(Good.kind).values()} == {State.DONE}
    assert len(no_pauses) == len(PAUSES), "the batch waited out its pauses, and no more"
    (fallback,) = events(caplog, "job_batch_settle_failed")
    assert fields(fallback)["rows"] > 1
    assert not events(caplog, "job_settle_failed"), "then each row landed alone"


def test_a_batch_whose_rows_cannot_reach_the_database_waits_out_one_set_of_tries_not_each(
    good, registry, make_runner, configure, caplog, no_pauses
):
    """The loop thread settles the fallback: a database that is gone costs it the
    batch's tries, then each row is tried once and left to its lease."""
    configure(max_concurrent=8)
    runner = make_runner(registry=registry)
    runner.store.settle_and_claim = failing_with_rows(
        runner.store.settle_and_claim, [transient_error() for _ in range(TRIES)]
    )
    queue_mixed(4, [])
    gone = [transient_error() for _ in range(TRIES)]
    real_complete_many = runner.store.complete_many

    def complete_many(done: Any, now: Any) -> Any:
        if len(done) == 1 and gone:
            raise gone.pop()
        return real_complete_many(done, now)

    runner.store.complete_many = complete_many
    runner.drain()

    assert len(no_pauses) == len(PAUSES), "one set of pauses, not one per row"
    batch = fields(events(caplog, "job_settle_retried")[0])["rows"]
    (fallback,) = events(caplog, "job_batch_settle_failed")
    assert fields(fallback)["rows"] == batch
    failed = events(caplog, "job_settle_failed")
    assert len(failed) == batch, "every row of that batch is left to its lease"
    left = [row for row in rows(Good.kind).values() if row.state == State.RUNNING]
    assert len(left) == batch


def test_done_attempts_waiting_when_the_runner_stops_are_settled_trying_again(
    good, registry, make_runner, caplog, no_pauses
):
    """The stop's settle is the pass's: a transient error is tried again."""
    runner = make_runner(registry=registry)
    queue_mixed(3, [])
    # Leave Done attempts waiting as a stop finds them: one pass claims, the
    # workers end them, and the runner stops before another pass.
    runner.run_pass()
    runner.pool.close(timeout=5.0)
    assert runner.completer.waiting() == 3, "three Done attempts wait for a settle"
    real_complete_many = runner.store.complete_many
    runner.store.complete_many = failing(real_complete_many, [transient_error()])
    runner.completer.settle_batch(runner.clock())

    done = {key for key, row in rows(Good.kind).items() if row.state == State.DONE}
    assert done == {f"good-{n}" for n in range(3)}, "every row settled once"
    (recovered,) = events(caplog, "job_settle_recovered")
    assert fields(recovered)["rows"] == 3
    assert not events(caplog, "job_batch_settle_failed")


@pytest.mark.postgresql
def test_a_settle_refused_a_connection_lands_once_another_frees_up(caplog):
    """For real: a role allowed one connection, held elsewhere, refuses the settle's
    ("too many connections"); the connection is let go during the pause (really
    waited: the server needs a moment to end its backend), and a later try
    connects and lands."""
    role = f"jobs_settles_starved_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
    try:
        params = {**driver.plain_connection_params(connection), "user": role}
        held = psycopg.connect(**params)

        def pause(seconds: float) -> None:  # the server ends the held one's backend meanwhile
            held.close()
            time.sleep(seconds)

        tries = SettleTries("default")
        tries.sleep = pause  # (after the `no_pauses` fixture's own)

        def settle() -> Any:
            with connection.wrap_database_errors, psycopg.connect(**params) as own:
                return own.execute("SELECT 1").fetchone()

        assert tries.run(settle, Job(kind=Bad.kind, key="starved", attempts=1), "done") == (1,)
        (retried,) = events(caplog, "job_settle_retried")
        assert "too many connections" in fields(retried)["error"], "refused a connection"
        assert len(events(caplog, "job_settle_recovered")) == 1, "then it landed"
    finally:
        held.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP ROLE {role}")


def test_after_a_settle_ran_out_of_tries_its_threads_next_settles_are_tried_once_for_a_while(
    no_pauses,
):
    """So the loop thread, timing out attempts one by one while the database is
    gone, waits out one settle's pauses, not every one's in turn."""
    tries = SettleTries("default")
    job = Job(kind=Bad.kind, key="k", attempts=1)

    def database_gone() -> None:
        raise transient_error()

    with freeze_time("2030-01-01 12:00:00") as frozen:
        with pytest.raises(GaveUp):
            tries.run(database_gone, job, "retry")
        assert len(no_pauses) == len(PAUSES), "the first settle waited out its pauses"
        with pytest.raises(GaveUp) as next_one:
            tries.run(database_gone, job, "retry")
        assert next_one.value.tries == 1, "the next one is tried once"
        assert len(no_pauses) == len(PAUSES), "without a pause"

        elsewhere: list[BaseException] = []
        worker = threading.Thread(target=lambda: _gave_up(tries, database_gone, job, elsewhere))
        worker.start()
        worker.join(10)
        assert isinstance(elsewhere[0], GaveUp), "another thread"
        assert elsewhere[0].tries == TRIES, "still gets every try: the memory is per thread"

        frozen.tick(QUIET_SECONDS + 1)
        with pytest.raises(GaveUp) as later:
            tries.run(database_gone, job, "retry")
        assert later.value.tries == TRIES, "and after the quiet spell, every try again"


def _gave_up(tries: SettleTries, step: Any, job: Job, into: list[BaseException]) -> None:
    try:
        tries.run(step, job, "retry")
    except GaveUp as error:
        into.append(error)
