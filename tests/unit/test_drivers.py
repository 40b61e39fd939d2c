"""The sentence a project reads when the driver jobs needs for its database is missing.

Pure: an ENGINE string and the installed modules, no database. A module is
made missing by putting None in `sys.modules` for the test, which is how
Python itself marks an import that must fail. The real path, a fresh project
without the extra, is proven in `tests/acceptance/test_package.py`.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from jobs import checks
from jobs.drivers import DISTRIBUTION, MissingDriver, engine_missing_driver


@pytest.mark.parametrize(
    ("engine", "module", "sentence"),
    [
        (
            "django.db.backends.postgresql",
            "psycopg",
            'jobs needs psycopg for PostgreSQL: pip install "django-durable-jobs[postgresql]"',
        ),
        (
            "django.contrib.gis.db.backends.postgis",
            "psycopg",
            'jobs needs psycopg for PostgreSQL: pip install "django-durable-jobs[postgresql]"',
        ),
        (
            "django.db.backends.mysql",
            "MySQLdb",
            'jobs needs mysqlclient for MySQL/MariaDB: pip install "django-durable-jobs[mysql]"',
        ),
    ],
)
def test_a_missing_driver_is_one_sentence_naming_the_extra_that_installs_it(
    monkeypatch, engine, module, sentence
):
    monkeypatch.setitem(sys.modules, module, None)

    assert engine_missing_driver(engine) == sentence, (
        "the project reads which package is missing and the one command that installs it"
    )


def test_an_installed_driver_needs_nothing(monkeypatch):
    """psycopg is installed wherever this suite runs; the stand-in makes it so for MySQLdb."""
    monkeypatch.setitem(sys.modules, "MySQLdb", sys)

    assert engine_missing_driver("django.db.backends.postgresql") is None
    assert engine_missing_driver("django.db.backends.mysql") is None


@pytest.mark.parametrize(
    "engine", ["django.db.backends.sqlite3", "django.db.backends.oracle", "example.custom.backend"]
)
def test_a_database_that_needs_no_extra_never_asks_for_one(monkeypatch, engine):
    """SQLite ships with Python; anything else is not ours to name (check jobs.E002 says so)."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "MySQLdb", None)

    assert engine_missing_driver(engine) is None


def test_the_sentence_names_the_distribution_pip_installs():
    """The extra belongs to the distribution's name on PyPI, not to the import name `jobs`."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text())["project"]
    assert project["name"] == DISTRIBUTION, "the sentence and pyproject.toml name one distribution"
    assert {"postgresql", "mysql"} <= set(project["optional-dependencies"]), (
        "every extra the sentence can name exists"
    )


def test_a_database_whose_driver_is_missing_is_check_jobs_e005(monkeypatch):
    """`manage.py check` names the extra (for a database Django itself can load, on psycopg2)."""
    sentence = 'jobs needs psycopg for PostgreSQL: pip install "django-durable-jobs[postgresql]"'

    def missing(alias):
        raise MissingDriver(sentence)

    monkeypatch.setattr(checks, "for_database", missing)

    found = checks.check_databases(None)

    assert [(error.id, error.msg) for error in found] == [("jobs.E005", sentence)]
