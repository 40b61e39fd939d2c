"""Shared fixtures: a fresh handler registry, in-process runners that clean up after
themselves, real `runjobs` processes pointed at the test database, and the orders
example's stub upstream."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection

from jobs.models import JobsConfig
from jobs.registry import Registry
from jobs.runner import Runner
from tests.upstream_stub import UpstreamStub

ROOT = Path(__file__).resolve().parent.parent


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


#: Databases where runners in many processes claim concurrently with row locks
#: (`FOR UPDATE SKIP LOCKED`): the rules marked `concurrent_db` hold there.
CONCURRENT_VENDORS = ("postgresql", "mysql")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Rules about PostgreSQL itself run in CI's PostgreSQL pass; rules about
    # concurrent claims across processes in its PostgreSQL and MariaDB passes.
    skips = {
        "postgresql": (
            not on_postgresql(),
            "about PostgreSQL; runs when DATABASE_URL is PostgreSQL",
        ),
        "concurrent_db": (
            connection.vendor not in CONCURRENT_VENDORS,
            "about concurrent claims; runs when DATABASE_URL is PostgreSQL or MySQL/MariaDB",
        ),
    }
    for marker, (skipped, reason) in skips.items():
        if skipped:
            for item in items:
                if marker in item.keywords:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def registry() -> Registry:
    """An empty registry, so each test runs only the handlers it defines."""
    return Registry()


@pytest.fixture
def configure() -> Callable[..., None]:
    """Set the queue's effective config keys for this test, e.g. `configure(max_attempts=3)`.

    Writes the live config row, as an operator saving the admin form would
    (without its validation: tests may need values the form refuses).
    """

    def apply(**values: int) -> None:
        row = JobsConfig.load()
        for name, value in values.items():
            setattr(row, name, value)
        row.save()

    return apply


@pytest.fixture
def make_runner() -> Iterator[Callable[..., Runner]]:
    made: list[Runner] = []

    def make(**kwargs: Any) -> Runner:
        runner = Runner(**kwargs)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.stop()
        runner.close()


def database_url() -> str:
    """A DATABASE_URL naming the test database, for subprocesses."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['TEST']['NAME'] or settings['NAME']}"
    scheme, default_user, default_port = {
        "postgresql": ("postgres", "postgres", 5432),
        "mysql": ("mysql", "root", 3306),
    }[connection.vendor]
    user = settings.get("USER") or default_user
    password = settings.get("PASSWORD")
    credentials = f"{quote(user, safe='')}:{quote(password, safe='')}" if password else user
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or default_port
    return f"{scheme}://{credentials}@{host}:{port}/{settings['NAME']}"


class RunJobs:
    """A real `manage.py runjobs` process on the test database."""

    def __init__(self, *args: str, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        self.log = tmp_path / f"runjobs-{id(self)}.log"
        full_env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": database_url(),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "runjobs", *args],
                cwd=ROOT,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, timeout: float = 60) -> int:
        """The exit status; a runner still running after `timeout` fails the test
        with the end of its output, which is otherwise lost with the test's tmp_path."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            tail = "\n".join(self.output().splitlines()[-40:])
            raise AssertionError(
                f"runjobs was still running {timeout}s later; its output ends:\n{tail}"
            ) from None

    def output(self) -> str:
        return self.log.read_text()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def runjobs(tmp_path: Path) -> Iterator[Callable[..., RunJobs]]:
    started: list[RunJobs] = []

    def start(*args: str, env: dict[str, str] | None = None) -> RunJobs:
        process = RunJobs(*args, tmp_path=tmp_path, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def upstream() -> Iterator[UpstreamStub]:
    """The orders example's upstream: a real HTTP server on localhost, told how to fail."""
    with UpstreamStub() as stub:
        yield stub
