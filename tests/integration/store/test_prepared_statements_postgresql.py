"""Prepared statements on PostgreSQL: names no other client uses, and a name
missing or taken on the server session is a clear error, never a statement run
with another's parameters (`jobs.store.postgresql.preparing`).

Behind a transaction-mode pooler (PgBouncer before 1.21) a client's statements
run in whichever server session is free. The mix-ups it makes are made here by
hand on a direct connection: another client's statement of the very name this
connection prepares next (taken), and this connection's statement deallocated
behind its back (missing, as in a session that never saw it). PgBouncer itself
is in tests/faults/test_connections.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.db import connection, transaction

from jobs.models import State
from jobs.store.admission import Admission
from jobs.store.postgresql import preparing
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

#: Our names for a connection's statements: psycopg's (`_<n>`: an insert) and
#: the store's own (`_p<n>`: the runner's pass), where psycopg would say `_pg3_<n>`.
NAME = re.compile(r"(jobs_[0-9a-f]{12})_(p?)(\d+)")


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch, settings) -> Iterator[None]:
    """Prepared statements asked for, and nothing found or mixed up yet in this
    process; each test on a session of its own."""
    settings.JOBS_PREPARED_STATEMENTS = True
    monkeypatch.setattr(preparing, "_mixed_up", set())
    monkeypatch.setattr(preparing, "_direct", {})
    connection.close()
    yield
    connection.close()


def prepared_here() -> dict[str, int]:
    """This session's prepared statements: name, how many values each takes."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, cardinality(parameter_types) FROM pg_prepared_statements")
        return dict(cursor.fetchall())


def claim_statement() -> str:
    """The claim's: of the runner's statements prepared (`_p<n>`), the only one
    that takes values after a claim (its settings take none)."""
    (name,) = [name for name, values in prepared_here().items() if values and "_p" in name]
    return name


def test_each_connection_prepares_its_statements_under_names_no_other_connection_uses(store):
    store.claim(Admission(T0, {KIND: LEASE}, 1))
    first = claim_statement()
    connection.close()
    store.claim(Admission(T0, {KIND: LEASE}, 1))
    second = claim_statement()

    ours, theirs = NAME.fullmatch(first), NAME.fullmatch(second)
    assert ours, f"not psycopg's _pg3_<n>, shared by every client: {first}"
    assert theirs, second
    assert ours[1] != theirs[1], "each connection its own"


def test_a_statement_name_another_client_took_on_the_session_is_a_clear_error_and_binds_nothing(
    store,
):
    """PgBouncer 1.18 hands this client a server session where another client
    prepared a statement of the name this one prepares next."""
    running, waiting = queue("a", run_at=T0 - LEASE), queue("b")
    store.claim(Admission(T0 - LEASE, {KIND: LEASE}, 1))  # prepares the claim, and claims "a"
    numbers = [found for name in prepared_here() if (found := NAME.fullmatch(name))]
    token = numbers[0][1]
    following = f"p{max(int(found[3]) for found in numbers if found[2]) + 1}"
    with connection.cursor() as cursor:  # another client's statement, of that name
        cursor.execute(f"PREPARE {token}_{following} AS SELECT 1")
    running.refresh_from_db()

    with pytest.raises(preparing.PreparedStatementsMixedUp) as raised:
        store.settle_and_claim([(running, None)], Admission(T0, {KIND: LEASE}, 1, runner="host:1"))

    said = str(raised.value)
    assert f'prepared statement "{token}_{following}" already exists' in said, said
    assert "PgBouncer" in said, "it names the pooler"
    assert "JOBS_PREPARED_STATEMENTS = False" in said, "and the setting"
    running.refresh_from_db()
    waiting.refresh_from_db()
    assert running.state == State.RUNNING, "nothing was settled"
    assert waiting.state == State.QUEUED, "nothing was claimed"


def test_a_prepared_statement_missing_from_the_session_is_a_clear_error_then_sent_unnamed(store):
    """PgBouncer 1.18 hands this client a server session that never saw its
    statement: the error says why; from then on nothing is prepared on that
    database in this process, and the next claim claims."""
    job = queue("a")
    store.claim(Admission(T0 - LEASE, {KIND: LEASE}, 1))  # prepares the claim (nothing is due yet)
    with connection.cursor() as cursor:  # a session without it (psycopg is not told)
        cursor.execute(f"DEALLOCATE {claim_statement()}")
    left = set(prepared_here())

    with pytest.raises(preparing.PreparedStatementsMixedUp) as raised:
        store.claim(Admission(T0, {KIND: LEASE}, 1))

    assert "does not exist" in str(raised.value), raised.value
    assert "JOBS_PREPARED_STATEMENTS" in str(raised.value)
    claimed = store.claim(Admission(T0, {KIND: LEASE}, 1))
    assert [claim.job.id for claim in claimed] == [job.id], "the next claim claims, unprepared"
    assert set(prepared_here()) == left, "and prepares nothing"


def test_the_passes_statements_are_prepared_again_after_psycopg_deallocates_all_at_a_rollback(
    store,
):
    """psycopg answers a rollback with `DEALLOCATE ALL` once it has prepared
    anything itself (an enqueue's insert): the pass's statements, which the
    store prepares, are prepared again, not taken for a pooler's mix-up."""
    store.claim(Admission(T0, {KIND: LEASE}, 1))
    before = claim_statement()
    with transaction.atomic():
        queue("a")  # the insert, prepared by psycopg
        transaction.set_rollback(True)
    assert not prepared_here(), "psycopg deallocated everything"

    store.claim(Admission(T0, {KIND: LEASE}, 1))

    assert claim_statement() not in ("", before), "prepared again, under a new name"


def test_unset_prepared_statements_are_on_where_the_server_is_reached_directly(store, settings):
    """The test database is reached directly: the session's server process is the
    one the server announced at connect (a pooler announces its own)."""
    settings.JOBS_PREPARED_STATEMENTS = None
    connection.ensure_connection()

    assert preparing.is_direct(connection)
    store.claim(Admission(T0, {KIND: LEASE}, 1))
    assert claim_statement(), "so the claim is prepared"


def test_behind_a_pooler_that_keeps_prepared_statements_the_inserts_are_prepared_not_the_pass(
    store, monkeypatch
):
    """`JOBS_PREPARED_STATEMENTS = True` behind a pooler (PgBouncer 1.21+ with
    `max_prepared_statements`): it keeps what the protocol prepares, as psycopg
    prepares an insert, but not what SQL's `PREPARE` does, as the pass is."""
    monkeypatch.setitem(preparing._direct, "default", False)  # as through a pooler

    queue("a")
    store.claim(Admission(T0, {KIND: LEASE}, 1))

    names = prepared_here()
    assert any(NAME.fullmatch(name) and "_p" not in name for name in names), "the insert is"
    assert not [name for name in names if "_p" in name], f"the pass is not: {names}"
