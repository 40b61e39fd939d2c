"""Whether the store's statements are prepared on a connection, under which
names, and what a pooler's mix-up of them becomes.

A prepared statement lives in one server session. Behind a transaction-mode
pooler (PgBouncer before 1.21, or later without `max_prepared_statements`;
Debian 12 ships 1.18) each transaction may run in another server session:
a statement prepared in one is missing in the next ("does not exist"), a
name another client prepared there is taken ("already exists"), or, worst,
it is bound: psycopg names every connection's statements `_pg3_0`,
`_pg3_1`... in the order it prepares them, so one client's parameters ran
another client's statement of the same name. Hence, per process and
database alias:

- `settings.JOBS_PREPARED_STATEMENTS` unset (None, the default): prepared
  only on a database found direct (`is_direct`), checked once, at the first
  of these statements.
- True: also behind a pooler that keeps them (PgBouncer 1.21+ with
  `max_prepared_statements` set; psycopg 3.2+ with libpq 17+): enqueue's
  inserts. The runner's pass is prepared only where the server is reached
  directly (`reached_directly`).
- False: never. Inserts go as unnamed statements, bound by the server, and
  the runner's pass with its values written in (`.planned`): every pooler
  passes either through, and each is planned at each execution.

Every statement is prepared under a name no other connection uses
(`Names`), so a statement of that name in whatever session the pooler
picked is this connection's own, with the same text: a mix-up can only be
a name missing or taken, which PostgreSQL refuses, never another statement
run with these parameters. The refusal is raised as
`PreparedStatementsMixedUp`, naming the pooler and the setting, and from then
on nothing is prepared on that database in this process.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
from django.conf import settings
from django.core.signals import setting_changed
from django.db import DatabaseError, OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import errors
from psycopg._preparing import Prepare, PrepareManager

from jobs import log
from jobs.store.postgresql.sql import BACKEND_PID_SQL

#: Never reached by a count: with prepared statements on, only the statements
#: this store asks for are prepared, never Django's own queries.
PREPARE_ONLY_WHEN_ASKED = 2**31

#: What `is_direct` found, by database alias.
_direct: dict[str, bool] = {}
#: `settings.JOBS_PREPARED_STATEMENTS` once read (`_setting`), until a test changes it.
_wanted: list[bool | None] = []
#: Aliases on which a prepared statement was mixed up: nothing is prepared
#: there again in this process, whatever the setting says.
_mixed_up: set[str] = set()


class PreparedStatementsMixedUp(OperationalError):
    """PostgreSQL refused a prepared statement's name as missing or taken:
    something between this process and the server (a connection pooler)
    runs one client connection's statements in more than one server session."""


def prepares(connection: BaseDatabaseWrapper) -> bool:
    """Whether the store's statements are prepared on `connection` (open)."""
    if connection.alias in _mixed_up:
        return False
    wanted = _setting()
    if wanted is not None:
        return wanted
    return reached_directly(connection)


def reached_directly(connection: BaseDatabaseWrapper) -> bool:
    """Whether `connection`'s database is reached with no pooler between
    (`is_direct`), found once per process and database; a pooler found is
    logged, once.

    The runner's pass is prepared only there, whatever the setting says: it
    is prepared by SQL (`PREPARE`, `.planned`), which no pooler carries from
    one server session to another (PgBouncer 1.21+ keeps only statements
    prepared by the protocol's own messages, as psycopg prepares inserts)."""
    alias = connection.alias
    direct = _direct.get(alias)
    if direct is None:
        direct = _direct[alias] = is_direct(connection)
        if not direct:
            log.event(
                "jobs_prepared_statements",
                outcome="off",
                database=alias,
                reason="a connection pooler is between this process and the server (the "
                "session's server process is not the one announced at connect): the "
                "runner's pass is sent written out, planned at each execution, and so are "
                "inserts unless JOBS_PREPARED_STATEMENTS = True (for a pooler that keeps "
                "prepared statements: PgBouncer 1.21+ with max_prepared_statements)",
            )
    return direct


def _setting() -> bool | None:
    """`settings.JOBS_PREPARED_STATEMENTS`, read once: Django's settings answer
    a name they do not hold by raising inside, which every pass paid."""
    if _wanted:
        return _wanted[0]
    value = getattr(settings, "JOBS_PREPARED_STATEMENTS", None)
    _wanted.append(None if value is None else bool(value))
    return _wanted[0]


def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "JOBS_PREPARED_STATEMENTS":
        _wanted.clear()


setting_changed.connect(_setting_changed)


def is_direct(connection: BaseDatabaseWrapper) -> bool:
    """Whether `connection` (open) reaches the server with no pooler between.

    At connect the server announces the id of the process that serves the
    session (with the key that cancels its queries); `pg_backend_pid()` is
    that process's id. A pooler must announce one of its own (PgBouncer: a
    random cancel key; so do pgcat, Odyssey and Supavisor), since the session
    it hands out is not bound to one server process: the two then differ.
    One round trip, once per process and database.
    """
    raw = connection.connection
    with connection.wrap_database_errors, UnpreparedCursor(raw) as cursor:
        cursor.execute(BACKEND_PID_SQL)
        found = cursor.fetchone()
    return found is not None and found[0] == raw.info.backend_pid


def mix_up(connection: BaseDatabaseWrapper, error: BaseException) -> Exception | None:
    """`PreparedStatementsMixedUp` for `error` if it is PostgreSQL refusing a
    prepared statement's name, else None. Nothing is prepared on `connection`'s
    database in this process from then on."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(
        cause, (errors.DuplicatePreparedStatement, errors.InvalidSqlStatementName)
    ):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    _mixed_up.add(connection.alias)
    said = str(cause).strip().splitlines()[0]
    log.event(
        "jobs_prepared_statements",
        logging.ERROR,
        outcome="mixed_up",
        database=connection.alias,
        error=said,
    )
    return PreparedStatementsMixedUp(
        f"PostgreSQL says: {said}. A connection pooler between this process and "
        f"the server (PgBouncer in transaction or statement mode, before 1.21 or "
        f"without max_prepared_statements) ran this connection's prepared "
        f"statements in another server session. Set JOBS_PREPARED_STATEMENTS = False "
        f"(or leave it unset: statements are then prepared only on a database "
        f"reached directly). Nothing is prepared on database {connection.alias!r} "
        f"in this process from now on."
    )


@contextlib.contextmanager
def mix_ups_explained(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Raise a prepared statement's name refused inside as `PreparedStatementsMixedUp`."""
    try:
        yield
    except DatabaseError as error:
        mixed_up = mix_up(connection, error)
        if mixed_up is None:
            raise
        raise mixed_up from error


class PreparingCursor(psycopg.Cursor[Any]):
    """psycopg's server-binding cursor, preparing every statement it runs
    (`driver.fetch` hands it to Django's cursor wrapper, which cannot pass
    `prepare`), under the names its connection's `Names` gives."""

    #: What `execute` does when its caller says nothing about preparing.
    prepares = True

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Any:
        if not self.prepares or prepare is None:
            prepare = self.prepares
        return super().execute(query, params, prepare=prepare, binary=binary)


class UnpreparedCursor(PreparingCursor):
    """psycopg's server-binding cursor, never preparing: each statement goes as
    an unnamed one, bound and planned at once, which every pooler passes
    through (also where psycopg prepared the same text before on this
    connection)."""

    prepares = False


class Names(PrepareManager):
    """psycopg's bookkeeping of one connection's prepared statements, with the
    names changed and those the store prepares itself (`.planned`) kept too.

    psycopg names each connection's statements `_pg3_0`, `_pg3_1`...: every
    client the same names, in the order it prepares. Here each is
    `jobs_<12 random hex digits>_<n>`, the digits the connection's own, and
    a statement prepared by `PREPARE` `jobs_<the same>_p<n>`. psycopg answers
    a rollback with `DEALLOCATE ALL` when it has prepared anything itself
    (the transaction may have dropped what its statements name): then the
    store's own are gone too, and forgotten here with psycopg's.
    """

    def __init__(self, previous: PrepareManager) -> None:
        super().__init__()
        vars(self).update(vars(previous))  # whatever psycopg knew, and its settings
        self.token = "jobs_" + secrets.token_hex(6)
        #: The store's statements prepared by `PREPARE` (`.planned`): text to name.
        self.planned: dict[str, str] = {}
        self._planned_count = 0

    def get(self, query: Any, prepare: bool | None = None) -> tuple[Prepare, bytes]:
        found, name = super().get(query, prepare)
        if found is Prepare.SHOULD:  # a new statement, named now and kept under that name
            name = self.token.encode() + name.removeprefix(b"_pg3")
        return found, name

    def clear(self) -> bool:
        deallocating = super().clear()
        if deallocating:
            self.planned.clear()
        return deallocating

    def planned_name(self) -> str:
        """A name for a statement the store prepares itself, never given before."""
        self._planned_count += 1
        return f"{self.token}_p{self._planned_count - 1}"


def names(raw: psycopg.Connection[Any]) -> Names:
    """`raw`'s `Names`, put in place of psycopg's own bookkeeping on first use
    (psycopg keeps it in `Connection._prepared`, not a public name:
    tests/integration/store/test_prepared_statements_postgresql.py fails if
    that changes)."""
    found = raw._prepared
    if not isinstance(found, Names):
        found = raw._prepared = Names(found)
    return found
