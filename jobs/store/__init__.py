"""Every SQL statement the queue runs, one module per database vendor.

`for_database(alias)` picks the store for a connection; nothing outside this
package builds SQL. `base` is the contract every store keeps, `orm` the verbs
written once for all of them, `rows` the decoding of claimed rows; `sqlite`,
`mysql` and `postgresql` hold each vendor's own statements. A vendor's module
is imported on first use, so a project on SQLite never imports a driver it has
not installed, and a missing driver is `jobs.drivers.MissingDriver`, naming the
extra that installs it.
"""

from __future__ import annotations

from importlib import import_module

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from jobs.drivers import MissingDriver, missing_driver
from jobs.store.base import NewJob, Renewal, Store
from jobs.store.rows import Claim

__all__ = ["Claim", "NewJob", "Renewal", "Store", "for_database"]

#: Each vendor's store (module, class), by Django's `connection.vendor`.
_VENDORS: dict[str, tuple[str, str]] = {
    "mysql": ("jobs.store.mysql", "MySQLStore"),  # MySQL and MariaDB both report "mysql"
    "postgresql": ("jobs.store.postgresql", "PostgreSQLStore"),
    "sqlite": ("jobs.store.sqlite", "SQLiteStore"),
}

#: The stores imported so far, by vendor.
_loaded: dict[str, type[Store]] = {}


def for_database(using: str | None = None) -> Store:
    """The store for database `using` (the default database when omitted).

    Raises `MissingDriver` when the driver jobs needs for it is not installed,
    and `ImproperlyConfigured` for a database jobs does not support.
    """
    alias = using or DEFAULT_DB_ALIAS
    try:
        vendor = connections[alias].vendor
    except ImproperlyConfigured:  # Django could not load the backend: no driver at all?
        _raise_if_missing_driver(alias)
        raise
    store = _loaded.get(vendor)
    if store is None:
        if vendor not in _VENDORS:
            raise ImproperlyConfigured(
                "jobs supports PostgreSQL, MySQL/MariaDB and SQLite; "
                f"database {alias!r} is {vendor}"
            )
        module, name = _VENDORS[vendor]
        try:
            store = _loaded[vendor] = getattr(import_module(module), name)
        except ModuleNotFoundError:  # Django's backend runs on a driver jobs cannot use
            _raise_if_missing_driver(alias)
            raise
    return store(alias)


def _raise_if_missing_driver(alias: str) -> None:
    problem = missing_driver(alias)
    if problem:
        raise MissingDriver(problem) from None
