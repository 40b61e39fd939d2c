"""What every database stores (`jobs.storable`), how a handler's end is checked
against it (`jobs.runner.outcomes`), and which database errors are worth another
try (`jobs.store.transient`): pure functions, no database."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import DataError, IntegrityError, InterfaceError, OperationalError

from jobs import Done, Failed, JobHandler, Reschedule, Retry
from jobs.handlers import RESULT_MAX_BYTES
from jobs.history import OutcomeRefused
from jobs.runner.outcomes import checked, raised
from jobs.storable import JSON_MAX_DEPTH, Unstorable, deeper_than, json_text, storable_text
from jobs.store.transient import transient


def nested(depth: int, *, objects: bool = False) -> Any:
    value: Any = {} if objects else []
    for _ in range(depth - 1):
        value = {"a": value} if objects else [value]
    return value


# -- jobs.storable ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fault"),
    [
        pytest.param({"t": "a\x00b"}, "contains a NUL character", id="nul"),
        pytest.param({"a\x00": 1}, "contains a NUL character", id="nul-in-a-key"),
        pytest.param(["\ud800"], "contains a lone surrogate", id="lone-high-surrogate"),
        pytest.param({"t": "x\udfff"}, "contains a lone surrogate", id="lone-low-surrogate"),
        pytest.param({"s": {1}}, "is not JSON-serialisable", id="a-set"),
        pytest.param(float("inf"), "is not JSON-serialisable", id="infinity"),
        pytest.param("x" * 100, "102 bytes of JSON; the limit is 101", id="too-large"),
        pytest.param(nested(JSON_MAX_DEPTH + 1), "nested more than 31 levels", id="32-lists"),
        pytest.param(
            nested(JSON_MAX_DEPTH + 1, objects=True), "nested more than 31", id="32-objects"
        ),
        pytest.param(nested(100_000), "nested more than 31 levels", id="100000-levels"),
    ],
)
def test_json_no_database_stores_is_refused_saying_what_is_wrong(value, fault):
    with pytest.raises(Unstorable, match=fault) as refused:
        json_text(value, "result", 101 if isinstance(value, str) else RESULT_MAX_BYTES)
    assert str(refused.value).startswith("result "), "naming what was refused"


def test_a_value_that_contains_itself_is_refused_not_recursed_into():
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(Unstorable, match="not JSON-serialisable: Circular reference"):
        json_text(loop, "result", RESULT_MAX_BYTES)
    assert deeper_than(loop, JSON_MAX_DEPTH), "and the walk ends"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(nested(JSON_MAX_DEPTH), id="31-lists"),
        pytest.param(nested(JSON_MAX_DEPTH, objects=True), id="31-objects"),
        pytest.param({"emoji": "\U0001f600"}, id="a-character-past-u+ffff"),
        pytest.param({"t": "\\u0000 \\ud800"}, id="escapes-written-out"),
        pytest.param([[1, [2]], {"a": [3]}] * 50, id="wide-not-deep"),
        pytest.param("[{" * 40, id="brackets-in-text"),
    ],
)
def test_json_every_database_stores_is_kept_as_its_text(value):
    assert json_text(value, "result", RESULT_MAX_BYTES)


def test_storable_text_escapes_nuls_and_lone_surrogates_and_keeps_the_rest():
    assert storable_text("a\x00b\ud800c\U0001f600") == "a\\x00b\\ud800c\U0001f600"
    plain = "déjà vu 😀, line\nand tab\t"
    assert storable_text(plain) is plain, "text with nothing to escape is itself"


# -- jobs.runner.outcomes ---------------------------------------------------------


class Handler(JobHandler):
    kind = "test.unit.outcomes"


def test_a_plain_done_and_a_done_with_a_storable_result_pass_unchanged():
    for done in (Done(), Done({"order": 42}), Done([1, "two"])):
        assert checked(Handler(), done) is done


@pytest.mark.parametrize(
    ("returned", "says"),
    [
        pytest.param(Done({"t": "\x00"}), "returned a Done whose result contains a NUL", id="nul"),
        pytest.param(Reschedule(timedelta(seconds=-1)), "must be positive", id="negative"),
        pytest.param(Reschedule(timedelta(0)), "must be positive", id="zero"),
        pytest.param(Reschedule(5), "whose delay is not a timedelta", id="int"),  # type: ignore[arg-type]
    ],
)
def test_an_outcome_that_cannot_be_carried_out_is_the_jobs_own_failed(returned, says):
    outcome = checked(Handler(), returned)
    assert isinstance(outcome, Failed)
    assert outcome.reason.startswith("Handler.run returned")
    assert says in outcome.reason
    assert isinstance(outcome.exception, OutcomeRefused), "on the record as a refused outcome"


@pytest.mark.parametrize(
    ("returned", "kind", "reason"),
    [
        pytest.param(Retry(None), Retry, "Handler.run returned Retry without a reason", id="none"),  # type: ignore[arg-type]
        pytest.param(Failed(7), Failed, "7", id="int"),  # type: ignore[arg-type]
        pytest.param(Retry("a\x00b"), Retry, "a\\x00b", id="nul"),
        pytest.param(Failed("\udc80"), Failed, "\\udc80", id="lone-surrogate"),
    ],
)
def test_a_reason_of_any_type_becomes_storable_text(returned, kind, reason):
    outcome = checked(Handler(), returned)
    assert type(outcome) is kind
    assert isinstance(outcome, (Retry, Failed))
    assert outcome.reason == reason


def test_an_exception_whose_message_has_a_nul_is_a_retry_with_a_storable_traceback():
    error = RuntimeError("bad \x00 byte and \ud800")
    try:
        raise error
    except RuntimeError:
        outcome = raised(error)
    assert outcome.exception is error
    assert outcome.reason.startswith("Traceback")
    assert outcome.reason.rstrip().endswith("RuntimeError: bad \\x00 byte and \\ud800")


# -- jobs.store.transient ---------------------------------------------------------


def wrapped(cause: Exception, as_: type[Exception] = OperationalError) -> Exception:
    """`cause` as Django raises it: its own class, raised from the driver's."""
    error = as_(*cause.args)
    error.__cause__ = cause
    return error


class MySQLError(Exception):
    """Stands for mysqlclient's errors (not installed everywhere): same module, same args."""

    __module__ = "MySQLdb._exceptions"


def busy_sqlite() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = 5
    return error


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(wrapped(psycopg.errors.SerializationFailure("x")), id="pg-serialization"),
        pytest.param(wrapped(psycopg.errors.DeadlockDetected("x")), id="pg-deadlock"),
        pytest.param(wrapped(psycopg.errors.TooManyConnections("x")), id="pg-too-many-clients"),
        pytest.param(wrapped(psycopg.errors.AdminShutdown("x")), id="pg-restart"),
        pytest.param(wrapped(psycopg.OperationalError("connection lost")), id="pg-no-answer"),
        pytest.param(wrapped(MySQLError(1213, "Deadlock found")), id="mysql-deadlock"),
        pytest.param(wrapped(MySQLError(1040, "Too many connections")), id="mysql-too-many"),
        pytest.param(wrapped(MySQLError(2006, "MySQL server has gone away")), id="mysql-gone"),
        pytest.param(wrapped(busy_sqlite()), id="sqlite-busy"),
        pytest.param(InterfaceError("connection already closed"), id="django-closed"),
    ],
)
def test_an_error_of_the_moment_is_worth_another_try(error):
    assert transient(error)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(wrapped(psycopg.errors.UntranslatableCharacter("x"), DataError), id="pg-nul"),
        pytest.param(wrapped(psycopg.errors.UniqueViolation("x"), IntegrityError), id="pg-unique"),
        pytest.param(wrapped(MySQLError(4025, "CONSTRAINT failed")), id="mariadb-check"),
        pytest.param(wrapped(sqlite3.OperationalError("no such table: x")), id="sqlite-no-table"),
        pytest.param(RuntimeError("a bug"), id="not-a-database-error"),
    ],
)
def test_an_error_that_would_recur_is_not(error):
    assert not transient(error)
