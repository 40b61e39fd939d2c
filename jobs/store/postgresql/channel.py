"""The wake-up channel's statements: NOTIFY and LISTEN, for `jobs.notifier.postgresql`.

Vendor SQL stays in `jobs.store`, so the notifier, which owns the listening
connection and its wait, runs these two through here. The store's own inserts
notify too (`Store.inserts_notify`): the single insert in its statement
(`sql.INSERT_SQL`), `insert_many` through `notify` in its transaction.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

from jobs.store.postgresql import sql
from jobs.store.postgresql.driver import plain_connection_params


def notify(connection: BaseDatabaseWrapper, payload: str = "") -> None:
    """Send `payload` on the channel when `connection`'s transaction commits
    (at once in autocommit), never on rollback."""
    with connection.cursor() as cursor:
        cursor.execute(sql.NOTIFY_SQL, [payload])


def listen(listener: psycopg.Connection[Any]) -> str:
    """Subscribe `listener` (a connection of the caller's own, in autocommit)
    to the channel; the channel's name."""
    listener.execute(sql.LISTEN_SQL)
    return sql.WAKEUP_CHANNEL


def listener_params(connection: BaseDatabaseWrapper) -> dict[str, Any]:
    """How to open a listening connection to the database `connection` reaches."""
    return plain_connection_params(connection)
