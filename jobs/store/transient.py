"""Which database errors are worth another try: the moment's, not the statement's.

A settle that failed on one of these (a dropped connection, a server
restarting, "too many clients", a deadlock, a serialization failure, a lock
or statement timeout, SQLite's busy database) may well succeed a moment later
on a new connection; any other error (a value refused, a constraint, a bug)
would fail the same way again. Told apart by each driver's own code, read
from the driver's exception that Django's error wraps, so no driver is
imported here: a project has only its own.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator

from django.db import InterfaceError

#: PostgreSQL's SQLSTATE classes and codes of the moment (`errcodes.txt`):
#: connection exceptions, serialization failure, deadlock, too many
#: connections, a lock not available at once, a statement or idle timeout,
#: an administrator's or a crash's shutdown, a server not yet accepting.
_POSTGRESQL_CLASSES = ("08",)
_POSTGRESQL_CODES = frozenset(
    {"40001", "40P01", "53300", "55P03", "57014", "57P01", "57P02", "57P03", "57P05", "25P03"}
)

#: MySQL's and MariaDB's error numbers of the moment: too many connections
#: (for the server, for the user), a lock wait timeout, a deadlock, a server
#: shutting down, a connection or query killed, a statement time limit, a
#: connection closed for inactivity, and the client's own lost or refused
#: connections and network errors.
_MYSQL_CODES = frozenset(
    {
        1040,  # ER_CON_COUNT_ERROR: too many connections
        1053,  # ER_SERVER_SHUTDOWN
        1158,  # ER_NET_READ_ERROR
        1159,  # ER_NET_READ_INTERRUPTED
        1160,  # ER_NET_ERROR_ON_WRITE
        1161,  # ER_NET_WRITE_INTERRUPTED
        1203,  # ER_TOO_MANY_USER_CONNECTIONS
        1205,  # ER_LOCK_WAIT_TIMEOUT
        1213,  # ER_LOCK_DEADLOCK
        1226,  # ER_USER_LIMIT_REACHED
        1317,  # ER_QUERY_INTERRUPTED
        1927,  # ER_CONNECTION_KILLED (MariaDB)
        1969,  # ER_STATEMENT_TIMEOUT (MariaDB's max_statement_time)
        3024,  # ER_QUERY_TIMEOUT (MySQL's max_execution_time)
        4031,  # ER_CLIENT_INTERACTION_TIMEOUT
        2002,  # CR_CONNECTION_ERROR
        2003,  # CR_CONN_HOST_ERROR
        2006,  # CR_SERVER_GONE_ERROR
        2013,  # CR_SERVER_LOST
        2055,  # CR_SERVER_LOST_EXTENDED
    }
)

#: SQLite's primary result codes of the moment: SQLITE_BUSY, SQLITE_LOCKED.
_SQLITE_CODES = frozenset({5, 6})


def transient(error: BaseException) -> bool:
    """Whether `error`, raised by a statement, may not recur on another try."""
    if isinstance(error, InterfaceError):
        return True  # Django's: the connection is closed or unusable
    for cause in _causes(error):
        module = type(cause).__module__
        if module.startswith("psycopg"):
            return _postgresql(cause)
        if module.startswith("MySQLdb"):
            return _mysql(cause)
        if isinstance(cause, sqlite3.Error):
            code = getattr(cause, "sqlite_errorcode", None)
            return isinstance(code, int) and code & 0xFF in _SQLITE_CODES
    return False


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, then what it was raised from (Django's errors wrap the driver's)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _postgresql(error: BaseException) -> bool:
    sqlstate = getattr(error, "sqlstate", None)
    if not sqlstate:
        # No answer from the server at all: a connection refused, lost or
        # closed. (psycopg is imported: it raised `error`.)
        psycopg = sys.modules["psycopg"]
        return isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError))
    return sqlstate[:2] in _POSTGRESQL_CLASSES or sqlstate in _POSTGRESQL_CODES


def _mysql(error: BaseException) -> bool:
    code = error.args[0] if error.args else None
    return isinstance(code, int) and code in _MYSQL_CODES
