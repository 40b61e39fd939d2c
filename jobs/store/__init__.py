"""Every SQL statement the queue runs, one module per database vendor.

`for_database(alias)` picks the store for a connection; nothing outside this
package builds SQL. `base` is the contract every store keeps, `orm` the verbs
written once for all of them, `rows` the decoding of claimed rows; `sqlite`,
`mysql` and `postgresql` hold each vendor's own statements.
"""

from __future__ import annotations

import importlib

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from jobs.store.base import NewJob, Store
from jobs.store.rows import Claim

__all__ = ["Claim", "NewJob", "Store", "for_database"]

#: Each vendor's store, by the vendor name Django's backend reports, as
#: "module:class". Imported on first use, so a project on SQLite or MySQL
#: never imports psycopg, which the PostgreSQL store needs at import.
_VENDORS = {
    "mysql": "jobs.store.mysql:MySQLStore",  # MySQL and MariaDB both report "mysql"
    "postgresql": "jobs.store.postgresql:PostgreSQLStore",
    "sqlite": "jobs.store.sqlite:SQLiteStore",
}

#: The store classes imported so far, by vendor: `for_database` runs on every
#: enqueue, so the import is looked up once per process.
_imported: dict[str, type[Store]] = {}


def for_database(using: str | None = None) -> Store:
    """The store for database `using` (the default database when omitted)."""
    alias = using or DEFAULT_DB_ALIAS
    vendor = connections[alias].vendor
    try:
        store_class = _imported[vendor]
    except KeyError:
        store_class = _import(alias, vendor)
    return store_class(alias)


def _import(alias: str, vendor: str) -> type[Store]:
    try:
        module_name, class_name = _VENDORS[vendor].split(":")
    except KeyError:
        raise ImproperlyConfigured(
            f"jobs supports PostgreSQL, MySQL/MariaDB and SQLite; database {alias!r} is {vendor}"
        ) from None
    store_class: type[Store] = getattr(importlib.import_module(module_name), class_name)
    _imported[vendor] = store_class
    return store_class
