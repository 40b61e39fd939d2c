"""psycopg plumbing for PostgreSQL's store: how its hot statements reach the server.

Django's cursors quote parameters into the statement text on the client and
never prepare; this store's statements (the runner's pass, the inserts) are
bound by the server and prepared once per connection instead, still through
Django's cursor wrapper so errors, execute wrappers and the query log behave
as for any query. Also: array literals written by hand (psycopg's list dumper
costs more than the statement), loading a claim's dates with psycopg's own
loader, a result read value by value when one value does not load, and the
parameters for a connection of one's own (the listener's).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC
from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import DataError
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.pq import Format, TransactionStatus

from jobs.store.postgresql.sql import PLANNER_SETTINGS_SQL

#: Never reached by a count: with prepared statements on, only the statements
#: this store asks for are prepared, never Django's own queries.
_PREPARE_ONLY_WHEN_ASKED = 2**31


class _PreparingCursor(psycopg.Cursor[Any]):
    """psycopg's server-binding cursor, preparing every statement it runs:
    what `fetch` hands to Django's cursor wrapper, which cannot pass `prepare`."""

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Any:
        return super().execute(
            query, params, prepare=True if prepare is None else prepare, binary=binary
        )


#: Connections on which `PLANNER_SETTINGS_SQL` has been run for good.
_PLANNING_ONCE: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()

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
    plan_once: bool = False,
    claimed_rows: bool = False,
    quiet: bool = False,
) -> Any:
    """A cursor for one of the store's hot statements on `connection`: Django's
    wrapper around a psycopg cursor that binds on the server.

    Parameters are bound by the server, not quoted into the text on the
    client as Django's cursors do: a pass names every id it settles, and
    quoting those arrays in Python, then parsing them in PostgreSQL, cost
    more than the work. And the statement is prepared once per connection
    (and, with `plan_once`, planned once and from the index whatever the
    statistics say: see `PLANNER_SETTINGS_SQL`), unless
    `settings.JOBS_PREPARED_STATEMENTS` is False: needed only behind a
    transaction-mode pooler that cannot keep prepared statements
    (PgBouncer before 1.21). It still runs through Django's cursor wrapper,
    so its errors are Django's `DatabaseError`, execute wrappers see it,
    and DEBUG's query log (and `CaptureQueriesContext`) lists it.

    `quiet` keeps a runner's own statements out of DEBUG's query log (a
    `CaptureQueriesContext` still sees them): a runner started under
    Django's default `DEBUG = True` logged each pass's statement, text,
    timing and all, which cost a no-op job a tenth of its instructions, for
    a log nobody reads outside a request.

    With `claimed_rows`, for a claim's result, its dates load through
    `_TIMESTAMPTZ_LOADER` (see `fetch` for the values that do not load).
    """
    connection.ensure_connection()
    raw = connection.connection
    prepare = bool(getattr(settings, "JOBS_PREPARED_STATEMENTS", True))
    if prepare and raw.prepare_threshold is None:
        # A new connection: Django turns preparing off for all of it.
        raw.prepare_threshold = _PREPARE_ONLY_WHEN_ASKED
    if prepare and plan_once and raw not in _PLANNING_ONCE:
        with connection.wrap_database_errors:
            raw.execute(PLANNER_SETTINGS_SQL)
        # Settings made inside a transaction are undone if it rolls back: a
        # connection that took them inside one takes them again next time.
        if raw.info.transaction_status == TransactionStatus.IDLE:
            _PLANNING_ONCE.add(raw)
    driver_cursor = (_PreparingCursor if prepare else psycopg.Cursor)(raw)
    if (
        claimed_rows
        and _TIMESTAMPTZ_LOADER is not None
        and connection.timezone is UTC
        and raw.pgconn.parameter_status(b"TimeZone") == b"UTC"
    ):
        driver_cursor.adapters.register_loader(_TIMESTAMPTZ_OID, _TIMESTAMPTZ_LOADER)
    logged = connection.force_debug_cursor or (connection.queries_logged and not quiet)
    wrap = connection.make_debug_cursor if logged else connection.make_cursor
    # Typed as taking Django's own wrapper; at run time any DB-API cursor.
    return wrap(cast(Any, driver_cursor))


def fetch(
    connection: BaseDatabaseWrapper,
    sql: str,
    params: Mapping[str, Any] | Sequence[Any],
    *,
    plan_once: bool = False,
    claimed_rows: bool = False,
    quiet: bool = False,
) -> list[tuple[Any, ...]]:
    """Run one of the store's hot statements (see `hot_cursor`) and return its rows.

    With `claimed_rows`, a value the driver cannot load (a date written by
    hand as `infinity`, which no datetime holds, in a table whose check
    from migration 0006 was dropped) comes back as its text
    instead of failing the whole result: the claim has already committed
    its rows as running, and must hand each one back (see `claim_from_row`).
    """
    with hot_cursor(
        connection, plan_once=plan_once, claimed_rows=claimed_rows, quiet=quiet
    ) as cursor:
        cursor.execute(sql, params)
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
