"""Every SQL statement the queue runs, one module per database vendor.

`for_database(alias)` picks the module for a connection; nothing outside this
package builds SQL.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from jobs.store.base import Claim, NewJob, Store
from jobs.store.mysql import MySQLStore
from jobs.store.postgresql import PostgreSQLStore
from jobs.store.sqlite import SQLiteStore

__all__ = ["Claim", "NewJob", "Store", "for_database"]

_VENDORS: dict[str, type[Store]] = {
    "mysql": MySQLStore,  # MySQL and MariaDB both report "mysql"
    "postgresql": PostgreSQLStore,
    "sqlite": SQLiteStore,
}


def for_database(using: str | None = None) -> Store:
    """The store for database `using` (the default database when omitted)."""
    alias = using or DEFAULT_DB_ALIAS
    vendor = connections[alias].vendor
    try:
        return _VENDORS[vendor](alias)
    except KeyError:
        raise ImproperlyConfigured(
            f"jobs supports PostgreSQL, MySQL/MariaDB and SQLite; database {alias!r} is {vendor}"
        ) from None
