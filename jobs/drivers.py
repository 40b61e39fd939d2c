"""Which database driver jobs needs, and the one sentence that names its extra.

PostgreSQL and MySQL/MariaDB each need a driver that `pip install
django-durable-jobs` leaves out, so a project on SQLite installs Django alone.
A project that forgot the extra reads what to install, not an ImportError
from deep inside the store. A leaf: no models, so the app config can ask
before Django imports any.
"""

from __future__ import annotations

import importlib.util

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

#: The distribution `pip install` knows the app by.
DISTRIBUTION = "django-durable-jobs"

#: The driver jobs' store needs (its module, the package that installs it,
#: the database's name, the extra that installs it), by the last part of a
#: database's ENGINE: how Django's own backends, GIS's and most wrappers of
#: them name the vendor, readable before the backend is loaded.
DRIVERS: dict[str, tuple[str, str, str, str]] = {
    "postgresql": ("psycopg", "psycopg", "PostgreSQL", "postgresql"),
    "postgis": ("psycopg", "psycopg", "PostgreSQL", "postgresql"),
    "mysql": ("MySQLdb", "mysqlclient", "MySQL/MariaDB", "mysql"),
}


class MissingDriver(ImproperlyConfigured):
    """The driver jobs needs for a database is not installed (`jobs.E005`)."""


def missing_driver(using: str | None = None) -> str | None:
    """What to install when database `using` needs a driver that is not there, else None.

    Read from its ENGINE setting and the installed modules, without loading
    Django's backend: that fails first, in Django's words, when there is no
    driver at all, and succeeds on psycopg2, which jobs cannot use.
    """
    database = connections.settings.get(using or DEFAULT_DB_ALIAS)
    if database is None:
        return None  # no such database: whoever uses it next says so, in Django's words
    return engine_missing_driver(str(database["ENGINE"]))


def engine_missing_driver(engine: str) -> str | None:
    """`missing_driver` for a database whose ENGINE is `engine`."""
    driver = DRIVERS.get(engine.rpartition(".")[2])
    if driver is None or importlib.util.find_spec(driver[0]) is not None:
        return None
    _, package, database, extra = driver
    return f'jobs needs {package} for {database}: pip install "{DISTRIBUTION}[{extra}]"'
