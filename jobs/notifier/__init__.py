"""How runners in other processes hear of new work: one notifier per database
vendor, beside the store.

`for_database(alias)` picks it as `jobs.store.for_database` picks the store:
`postgresql` sends and hears LISTEN/NOTIFY (its statements are the store's,
`jobs.store.postgresql.channel`), `sqlite` rings a Unix socket per runner
(`sqlite_doorbell`, no SQL at all), and on MySQL the `base` notifier carries
nothing: runners find work at their poll. The store keeps the verbs; where
its insert notifies in its own statement it says so (`Store.inserts_notify`).
`jobs.wakeup` is the one user: it notifies on commit and runs the listener.
"""

from __future__ import annotations

from importlib import import_module

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from jobs.drivers import MissingDriver, missing_driver
from jobs.notifier.base import Notifier

__all__ = ["Notifier", "for_database"]

#: Each vendor's notifier (module, class), by Django's `connection.vendor`.
_VENDORS: dict[str, tuple[str, str]] = {
    "mysql": ("jobs.notifier.base", "Notifier"),  # nothing crosses processes
    "postgresql": ("jobs.notifier.postgresql", "PostgreSQLNotifier"),
    "sqlite": ("jobs.notifier.sqlite", "SQLiteNotifier"),
}

#: The notifiers imported so far, by vendor.
_loaded: dict[str, type[Notifier]] = {}


def for_database(using: str | None = None) -> Notifier:
    """The notifier for database `using` (the default database when omitted).

    Raises as `jobs.store.for_database` does: `MissingDriver` when the driver
    is not installed, `ImproperlyConfigured` for a database jobs does not support.
    """
    alias = using or DEFAULT_DB_ALIAS
    vendor = connections[alias].vendor
    notifier = _loaded.get(vendor)
    if notifier is None:
        if vendor not in _VENDORS:
            raise ImproperlyConfigured(f"jobs cannot wake runners on {vendor} ({alias!r})")
        module, name = _VENDORS[vendor]
        try:
            notifier = _loaded[vendor] = getattr(import_module(module), name)
        except ModuleNotFoundError:  # the vendor's driver is missing
            problem = missing_driver(alias)
            if problem:
                raise MissingDriver(problem) from None
            raise
    return notifier(alias)
