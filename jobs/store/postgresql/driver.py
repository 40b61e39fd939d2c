"""psycopg plumbing for PostgreSQL's store: how its hot statements reach the server.

Django's cursors quote parameters into the statement text on the client and
never prepare; this store's statements (the runner's pass, the inserts) are
bound by the server, and prepared once per connection where that is safe
(`.preparing`), still through Django's cursor wrapper so errors, execute
wrappers and the query log behave as for any query. The runner's pass is
planned under settings of its own, made for its transaction only and sent
with it. Also: array literals written by hand (psycopg's list dumper costs
more than the statement), loading a claim's dates with psycopg's own
loader, a result read value by value when one value does not load, and the
parameters for a connection of one's own (the listener's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC
from typing import Any, cast

import psycopg
from django.db import DatabaseError, DataError
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.pq import Format

from jobs.store.postgresql import planned, preparing

_TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid
#: psycopg's own timestamptz loader (its C one where psycopg has its binary
#: part). Django wraps it in a Python loader that sets each value's tzinfo to
#: the connection's zone; where that zone is UTC and so is the session's,
#: psycopg's loader already gives the same value, and a claim's dates decode
#: faster without the wrapper.
_TIMESTAMPTZ_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)


def hot_cursor(
    connection: BaseDatabaseWrapper,
    *,
    claimed_rows: bool = False,
    quiet: bool = False,
    prepare: bool | None = None,
) -> Any:
    """A cursor for one of the store's hot statements on `connection`: Django's
    wrapper around a psycopg cursor that binds on the server.

    Parameters are bound by the server, not quoted into the text on the
    client as Django's cursors do: a pass names every id it settles, and
    quoting those arrays in Python, then parsing them in PostgreSQL, cost
    more than the work. The statement is prepared once per connection where
    `preparing.prepares` says so (`prepare` when the caller has asked it
    already), else sent unnamed. It still runs through Django's cursor
    wrapper, so its errors are Django's `DatabaseError`, execute wrappers
    see it, and DEBUG's query log (and `CaptureQueriesContext`) lists it.
    Run it with `fetch`, or inside `mix_ups_explained`.

    `quiet` keeps a runner's own statements out of DEBUG's query log (a
    `CaptureQueriesContext` still sees them): a runner started under
    Django's default `DEBUG = True` logged each pass's statement, text,
    timing and all, for a log nobody reads outside a request.

    With `claimed_rows`, for a claim's result, its dates load through
    `_TIMESTAMPTZ_LOADER` (see `fetch` for the values that do not load).
    """
    connection.ensure_connection()
    driver_cursor = _driver_cursor(connection, prepare)
    if (
        claimed_rows
        and _TIMESTAMPTZ_LOADER is not None
        and connection.timezone is UTC
        and driver_cursor.connection.pgconn.parameter_status(b"TimeZone") == b"UTC"
    ):
        driver_cursor.adapters.register_loader(_TIMESTAMPTZ_OID, _TIMESTAMPTZ_LOADER)
    logged = connection.force_debug_cursor or (connection.queries_logged and not quiet)
    wrap = connection.make_debug_cursor if logged else connection.make_cursor
    # Typed as taking Django's own wrapper; at run time any DB-API cursor.
    return wrap(cast(Any, driver_cursor))


def _driver_cursor(connection: BaseDatabaseWrapper, prepare: bool | None) -> psycopg.Cursor[Any]:
    """A psycopg cursor on `connection` (open), preparing or not (see `hot_cursor`)."""
    raw = connection.connection
    if prepare is None:
        prepare = preparing.prepares(connection)
    if not prepare:
        return preparing.UnpreparedCursor(raw)
    if raw.prepare_threshold is None:
        # A new connection: Django turns preparing off for all of it.
        raw.prepare_threshold = preparing.PREPARE_ONLY_WHEN_ASKED
    preparing.names(raw)
    return preparing.PreparingCursor(raw)


def fetch(
    connection: BaseDatabaseWrapper,
    sql: str,
    params: Mapping[str, Any] | Sequence[Any],
    *,
    planner_settings: bool = False,
    claimed_rows: bool = False,
    quiet: bool = False,
) -> list[tuple[Any, ...]]:
    """Run one of the store's hot statements (see `hot_cursor`) and return its rows.

    With `planner_settings` (and named `params`), the statement is planned
    under the runner's settings (`sql.PLANNER_SETTINGS_SQL`), made for its
    transaction only and sent with it in one message (`planned`): in
    autocommit one implicit transaction, which ends with the statement
    (inside a transaction, with that one).

    A prepared statement's name refused as missing or taken is raised as
    `preparing.PreparedStatementsMixedUp`, which says why.

    With `claimed_rows`, a value the driver cannot load (a date written by
    hand as `infinity`, which no datetime holds, in a table whose check
    from migration 0006 was dropped) comes back as its text
    instead of failing the whole result: the claim has already committed
    its rows as running, and must hand each one back (see `claim_from_row`).
    """
    connection.ensure_connection()
    prepare = preparing.prepares(connection)
    try:
        if planner_settings:
            assert isinstance(params, Mapping), "a planned statement's placeholders are named"
            raw = connection.connection
            pass_prepared = prepare and preparing.reached_directly(connection)
            text, preparing_now = planned.message(raw, sql, params, pass_prepared)
            with hot_cursor(
                connection, claimed_rows=claimed_rows, quiet=quiet, prepare=False
            ) as cursor:
                cursor.execute(text)
                if preparing_now:
                    planned.prepared(raw, preparing_now)
                while cursor.nextset():
                    pass  # to the statement's own rows, after its settings'
                return _fetched(cursor, claimed_rows)
        with hot_cursor(
            connection, claimed_rows=claimed_rows, quiet=quiet, prepare=prepare
        ) as cursor:
            cursor.execute(sql, params)
            return _fetched(cursor, claimed_rows)
    except DatabaseError as error:
        mixed_up = preparing.mix_up(connection, error)
        if mixed_up is None:
            raise
        raise mixed_up from error


def _fetched(cursor: Any, claimed_rows: bool) -> list[tuple[Any, ...]]:
    """The cursor's rows (see `fetch` for `claimed_rows`)."""
    try:
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    except DataError:
        if not claimed_rows:
            raise
        rows = _rows_as_far_as_they_load(cursor.cursor)
    return rows


def plain_connection_params(connection: BaseDatabaseWrapper) -> dict[str, Any]:
    """What `psycopg.connect` needs to reach the database `connection` reaches,
    without the cursor class, adapters context and preparing policy Django
    sets up for its own use: for a connection of one's own (the listener's, a
    benchmark's raw baseline)."""
    return {
        key: value
        for key, value in connection.get_connection_params().items()
        if key not in ("cursor_factory", "context", "prepare_threshold")
    }


def _rows_as_far_as_they_load(cursor: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
    """The cursor's result with each value loaded as its column's type, or left
    as its text where the driver refuses it. The slow path, for a result that
    failed to load as a whole: each value on its own."""
    result = cursor.pgresult
    if result is None:
        return []
    column_loaders = []
    for column in range(result.nfields):
        oid = result.ftype(column)
        loader_class = cursor.adapters.get_loader(oid, Format(result.fformat(column)))
        column_loaders.append(None if loader_class is None else loader_class(oid, cursor))
    encoding = cursor.connection.info.encoding
    rows = []
    for number in range(result.ntuples):
        row: list[Any] = []
        for column, loader in enumerate(column_loaders):
            data = result.get_value(number, column)
            if data is None:
                row.append(None)
                continue
            try:
                if loader is not None:
                    row.append(loader.load(data))
                    continue
            except psycopg.DataError:
                pass
            row.append(bytes(data).decode(encoding, errors="replace"))
        rows.append(tuple(row))
    return rows


def already_json(text: str) -> str:
    """For `Jsonb`: the payload is JSON text already, checked by `JobSpec.validate`."""
    return text


def plain_array_literal(items: Iterable[str | None]) -> str:
    """`array_literal` for items that need no quoting: the text of UUIDs,
    integers and ISO timestamps has no comma, quote, brace, backslash or space."""
    return "{" + ",".join("NULL" if item is None else item for item in items) + "}"


def array_literal(items: Iterable[str | None]) -> str:
    """A PostgreSQL array literal of `items`, each quoted (None is NULL).

    Written by hand rather than handing psycopg lists: its list dumper
    inspects every element's type on every call, which cost the runner's
    pass more than its database round trip. Each statement casts the literal
    to its array type, so a malformed one is refused, not guessed.
    """
    quoted = (
        "NULL" if item is None else '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for item in items
    )
    return "{" + ",".join(quoted) + "}"
