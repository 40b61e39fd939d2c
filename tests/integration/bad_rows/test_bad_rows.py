"""Rows a handler cannot use: what a runner does with a row written by hand past `enqueue`.

`enqueue` refuses every bad spec, but the table can still be written by hand (a
migration, a support fix in `psql`, a restore). Each such row is retired with a
`last_error` that says what is wrong, or left waiting, and never crashes the
runner or holds up the rows behind it. The rows here are made bad with raw SQL
UPDATEs, the way a person would; what a database lets one write differs
(PostgreSQL's jsonb holds only valid JSON, SQLite's text holds anything once
its JSON_VALID check is switched off), and the tests say which is which. Values
past what a date or a lease can hold are test_absurd_values.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import DataError, IntegrityError, connection
from django.urls import reverse
from django.utils import timezone

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from jobs.store import for_database
from jobs.store.admission import Admission
from tests.conftest import on_postgresql
from tests.integration.bad_rows.support import EARLIEST, KIND, LATEST, _Sink, queue, reloaded

pytestmark = pytest.mark.django_db(transaction=True)


def write_payload_by_hand(job: Job, text: str) -> None:
    """UPDATE the payload column with raw SQL, as a person at a database prompt would."""
    cast = "::jsonb" if on_postgresql() else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE jobs_job SET payload = %s{cast} WHERE id = %s",
            [text, for_database().prepare("id", job.id)],
        )


def write_column_by_hand(job: Job, column: str, value: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE jobs_job SET {connection.ops.quote_name(column)} = %s WHERE id = %s",
            [value, for_database().prepare("id", job.id)],
        )


# -- payloads that are not a JSON object ---------------------------------------


NOT_AN_OBJECT = [
    pytest.param("[1, 2]", "list", id="an-array"),
    pytest.param('"order 42"', "str", id="a-string"),
    pytest.param('"{\\"n\\": 1}"', "str", id="a-string-holding-an-object"),
    pytest.param("42", "int", id="a-number"),
    pytest.param("true", "bool", id="a-boolean"),
    pytest.param("null", "null", id="null"),
]


@pytest.mark.parametrize(("text", "json_type"), NOT_AN_OBJECT)
def test_a_payload_written_by_hand_that_is_not_an_object_is_retired_and_the_rest_drain(
    handler, registry, make_runner, text, json_type
):
    before = [queue(f"good-{n}") for n in range(3)]
    bad = queue("bad")
    after = [queue(f"later-{n}") for n in range(3)]
    write_payload_by_hand(bad, text)

    make_runner(registry=registry).drain()

    retired = reloaded(bad)
    assert retired.state == State.FAILED, "the row the handler cannot use is retired as failed"
    assert retired.last_error.startswith("payload is not a JSON object"), (
        f"its last_error says what is wrong with it: {retired.last_error!r}"
    )
    assert json_type in retired.last_error, f"and names what it is instead: {retired.last_error!r}"
    assert "bad" not in handler.runs, "the handler is never given the unusable payload"
    assert [key for key, _ in handler.abandoned] == ["bad"], "abandon is called once, for it alone"
    for job in before + after:
        assert reloaded(job).state == State.DONE, f"{job.key}, claimed alongside it, still ran"


def test_text_that_is_not_json_in_a_sqlite_payload_is_retired_saying_so(
    handler, registry, make_runner
):
    """SQLite's payload column is text under a JSON_VALID check; with checks off a
    person can still write anything there."""
    if connection.vendor != "sqlite":
        pytest.skip(
            "about SQLite's text payload column; "
            "PostgreSQL's jsonb and MariaDB's JSON check refuse invalid JSON"
        )
    good, bad = queue("good"), queue("bad")
    with pytest.raises(IntegrityError):
        write_payload_by_hand(bad, "{not json")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA ignore_check_constraints = ON")
        try:
            write_payload_by_hand(bad, "{not json")
        finally:
            cursor.execute("PRAGMA ignore_check_constraints = OFF")

    make_runner(registry=registry).drain()

    retired = reloaded_raw(bad)
    assert retired["state"] == State.FAILED, "the row is retired as failed"
    assert retired["last_error"].startswith("payload is not a JSON object: it is not valid JSON"), (
        f"its last_error says the payload is not JSON: {retired['last_error']!r}"
    )
    assert "'{not json'" in retired["last_error"], "and quotes what the column holds"
    assert handler.abandoned == [("bad", retired["last_error"])], "abandon is called once"
    assert reloaded(good).state == State.DONE, "the row beside it still ran"


def reloaded_raw(job: Job) -> dict[str, Any]:
    """The row's state and error without decoding its (invalid) payload."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, last_error FROM jobs_job WHERE id = %s",
            [for_database().prepare("id", job.id)],
        )
        state, last_error = cursor.fetchone()
    return {"state": state, "last_error": last_error}


def test_postgresql_refuses_invalid_json_in_the_payload_column():
    if not on_postgresql():
        pytest.skip("about PostgreSQL's jsonb")
    bad = queue("bad")
    with pytest.raises(DataError):
        write_payload_by_hand(bad, "{not json")


def test_the_claim_returns_every_row_of_its_batch_marking_only_the_unusable_one(handler):
    """The claim has already counted the attempt; an exception here would strand the batch."""
    keys = ["a", "b", "c"]
    for key in keys:
        queue(key)
    write_payload_by_hand(Job.objects.get(key="b"), "[]")
    claims = for_database().claim(Admission(timezone.now(), {KIND: timedelta(minutes=5)}, 10))
    assert sorted(claim.job.key for claim in claims) == keys, "every ready row was claimed"
    unusable = {claim.job.key: claim.unusable for claim in claims}
    assert unusable["a"] is None, "a good row is usable"
    assert unusable["c"] is None, "so is the good row after the bad one"
    assert unusable["b"] is not None, "the bad row is marked unusable"
    assert unusable["b"].startswith("payload is not a JSON object"), unusable["b"]


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param("next tuesday", id="words"),
        pytest.param("2026-13-45 00:00:00", id="a-date-that-does-not-exist"),
    ],
)
def test_a_date_column_written_by_hand_as_garbage_is_retired_saying_which(
    handler, registry, make_runner, garbage
):
    """SQLite's datetime columns are text; PostgreSQL's timestamptz holds only dates."""
    if connection.vendor != "sqlite":
        pytest.skip("about SQLite's text datetime columns: PostgreSQL and MySQL store only dates")
    good, bad = queue("good"), queue("bad")
    write_column_by_hand(bad, "deadline", garbage)

    make_runner(registry=registry).drain()

    retired = reloaded_raw(bad)
    assert retired["state"] == State.FAILED, "the row is retired as failed"
    assert f"deadline is not a date and time: {garbage!r}" in retired["last_error"], (
        f"its last_error names the column and its value: {retired['last_error']!r}"
    )
    assert handler.runs == ["good"], "the handler never ran it"
    assert handler.abandoned == [("bad", retired["last_error"])], "abandon is called once"
    assert reloaded(good).state == State.DONE, "the row beside it still ran"


@pytest.mark.parametrize("value", ["infinity", "-infinity", "10000-01-01 00:00:00+00"])
@pytest.mark.parametrize("column", ["run_at", "deadline", "created_at"])
def test_postgresql_refuses_a_date_written_by_hand_that_no_datetime_holds(column, value):
    """timestamptz holds `infinity` and years past 9999; a Python datetime does
    not, and one such row made every admin page listing it fail."""
    if not on_postgresql():
        pytest.skip("about PostgreSQL's timestamptz, which holds what a datetime cannot")
    job = queue("bad")
    before = getattr(job, column)

    with (
        pytest.raises(IntegrityError, match="jobs_job_dates_in_range"),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            f"UPDATE jobs_job SET {connection.ops.quote_name(column)} = %s WHERE id = %s",
            [value, job.id],
        )

    assert getattr(reloaded(job), column) == before, "nothing is written"


@pytest.fixture
def without_dates_check() -> Iterator[None]:
    """jobs_job without migration 0006's check, as someone may have left it
    (dropped for a restore, say); put back afterwards."""
    if not on_postgresql():
        pytest.skip("about PostgreSQL's timestamptz, which holds infinity")
    migration = importlib.import_module("jobs.migrations.0006_postgresql_dates_in_range")

    with connection.cursor() as cursor:
        cursor.execute(migration.DROP_DATES_IN_RANGE_SQL)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobs_job")
            cursor.execute(migration.DATES_IN_RANGE_SQL)


@pytest.mark.parametrize("column", ["deadline", "created_at"])
def test_where_the_check_was_dropped_a_date_of_infinity_is_retired_saying_which_and_the_rest_run(
    handler, registry, make_runner, column, without_dates_check
):
    """The driver refuses to load `infinity`, and the claim (already committed)
    must still hand back every row."""
    good, bad, later = queue("good"), queue("bad"), queue("later")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE jobs_job SET \"{column}\" = 'infinity' WHERE id = %s", [bad.id])

    make_runner(registry=registry).drain()

    retired = reloaded_raw(bad)
    assert retired["state"] == State.FAILED, "the row is retired as failed"
    assert f"{column} is not a date and time: 'infinity'" in retired["last_error"], (
        f"its last_error names the column and its value: {retired['last_error']!r}"
    )
    assert sorted(handler.runs) == ["good", "later"], "the rows claimed with it ran, it did not"
    assert handler.abandoned == [("bad", retired["last_error"])], "abandon is called once"
    assert reloaded(good).state == reloaded(later).state == State.DONE, "and settled done"


def test_migrating_moves_dates_no_datetime_holds_to_the_nearest_one_so_the_admin_lists_them(
    admin_client,
):
    if not on_postgresql():
        pytest.skip("about PostgreSQL's timestamptz, which holds what a datetime cannot")
    never, long_ago, fine = queue("never"), queue("long ago"), queue("fine")
    call_command("migrate", "jobs", "0005", verbosity=0)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE jobs_job SET run_at = 'infinity', deadline = '20000-01-01 00:00:00+00' "
                "WHERE id = %s",
                [never.id],
            )
            cursor.execute(
                "UPDATE jobs_job SET created_at = '-infinity' WHERE id = %s", [long_ago.id]
            )
    finally:
        call_command("migrate", "jobs", verbosity=0)

    assert (reloaded(never).run_at, reloaded(never).deadline) == (LATEST, LATEST), (
        "infinity and a year past 9999 become the latest instant a datetime holds"
    )
    assert reloaded(long_ago).created_at == EARLIEST, "-infinity the earliest"
    assert reloaded(fine).run_at == fine.run_at, "a date in range is left as it was"
    assert admin_client.get(reverse("admin:jobs_job_changelist")).status_code == 200, (
        "the admin's list renders them"
    )
    call_command("jobs", "list", stdout=_Sink())


def test_an_unusable_row_of_a_kind_with_no_handler_waits_unclaimed(handler, registry, make_runner):
    assert enqueue(JobSpec.now("test.nobody_handles_this", "k"))
    orphan = Job.objects.get(kind="test.nobody_handles_this")
    write_payload_by_hand(orphan, "[1]")
    good = queue("good")

    make_runner(registry=registry).drain()

    waiting = reloaded(orphan)
    assert (waiting.state, waiting.attempts) == (State.QUEUED, 0), (
        "a row no handler answers for is never claimed, so it waits with its attempts unspent"
    )
    assert reloaded(good).state == State.DONE, "while the runner drains the others"


def test_a_zero_date_written_by_hand_on_mysql_is_retired_saying_which_and_the_rest_run(
    handler, registry, make_runner
):
    """MySQL stores `0000-00-00` where its sql_mode allows it, and the driver hands
    it over as None: a row that cannot say when it was due. It is retired like
    any date that does not decode, and the rows claimed with it still run."""
    if connection.vendor != "mysql":
        pytest.skip("about MySQL's zero date, which PostgreSQL and SQLite never store")
    first, bad, last = queue("first"), queue("bad"), queue("last")
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = ''")  # as a permissive server would take it
        try:
            write_column_by_hand(bad, "run_at", "0000-00-00 00:00:00")
        finally:
            cursor.execute("SET SESSION sql_mode = DEFAULT")

    make_runner(registry=registry).drain()

    retired = reloaded_raw(bad)
    assert retired["state"] == State.FAILED, "the row is retired as failed"
    assert "run_at is not a date and time" in retired["last_error"], retired["last_error"]
    assert sorted(handler.runs) == ["first", "last"], "the handler never ran it"
    assert reloaded(first).state == State.DONE, "the rows beside it still ran"
    assert reloaded(last).state == State.DONE


# -- enumerations -----------------------------------------------------------------


def test_a_state_written_by_hand_must_be_one_of_the_five_and_the_row_keeps_its_identity():
    """An unknown state would make `live` NULL: the key freed, the row never claimed."""
    job = queue("unknown-state")
    with pytest.raises(IntegrityError):
        write_column_by_hand(job, "state", "bogus")
    assert reloaded(job).state == State.QUEUED
    assert not enqueue(JobSpec.now(KIND, "unknown-state")), "the identity is still held"
