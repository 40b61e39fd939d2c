"""The drain on a busy server: the as-met drain, quiet, then again while pgbench
runs its write-only script (`pgbench -N`, two clients) against a database of
its own on the same PostgreSQL server.

What the load costs the queue is mostly waiting: every commit waits for the
WAL flush of everyone's commits before it. The pgbench database is created
and initialised here (`pgbench -i`) and dropped afterwards. PostgreSQL only,
and only where the `pgbench` program is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from acmeproxy.benchmarks.bench import drains, stage
from acmeproxy.benchmarks.bench.measure import AS_MET, Result
from acmeproxy.benchmarks.bench.runner import Runner

#: pgbench clients beside the drain: as many as this machine has cores.
CLIENTS = 2
#: Seconds pgbench runs before the drain starts, so the drain meets a steady load.
RAMP_SECONDS = 1.0


def _server_connection() -> Any:
    """An autocommit psycopg connection to the server's maintenance database."""
    import psycopg

    from jobs.store.postgresql import driver

    params = {**driver.plain_connection_params(connection), "dbname": "postgres"}
    return psycopg.connect(**params, autocommit=True)


def _pgbench_args(database: str) -> list[str]:
    settings = connection.settings_dict
    return [
        "-h",
        settings.get("HOST") or "127.0.0.1",
        "-p",
        str(settings.get("PORT") or 5432),
        "-U",
        settings.get("USER") or "postgres",
        database,
    ]


def _environment() -> dict[str, str]:
    password = connection.settings_dict.get("PASSWORD")
    return {**os.environ, **({"PGPASSWORD": password} if password else {})}


@contextmanager
def pgbench_database(scale: int) -> Iterator[str]:
    """A new database beside the benchmark's, initialised by `pgbench -i -s SCALE`."""
    name = f"{connection.settings_dict['NAME']}_pgbench"
    with _server_connection() as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')
    try:
        subprocess.run(
            ["pgbench", "-i", "-q", "-s", str(scale), *_pgbench_args(name)],
            env=_environment(),
            check=True,
            capture_output=True,
        )
        yield name
    finally:
        with _server_connection() as server:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _history_rows(database: str) -> int:
    """pgbench -N inserts one history row per transaction: its count so far."""
    import psycopg

    from jobs.store.postgresql import driver

    params = {**driver.plain_connection_params(connection), "dbname": database}
    with psycopg.connect(**params, autocommit=True) as other:
        row = other.execute("SELECT count(*) FROM pgbench_history").fetchone()
    return int(row[0]) if row else 0


def quiet_and_loaded(count: int, scale: int) -> list[Result]:
    label = f"drain while pgbench -N -c {CLIENTS} writes on the same server"
    if connection.vendor != "postgresql":
        reason = "PostgreSQL only: the load is pgbench's"
        return [Result("load.loaded", label, AS_MET, skipped=reason)]
    if shutil.which("pgbench") is None:
        return [Result("load.loaded", label, AS_MET, skipped="pgbench is not installed")]
    with pgbench_database(scale) as database, stage.config(), Runner() as runner:
        quiet = drains.into_running(
            runner, count, "load.quiet", "drain, quiet server (the load part's own)"
        )
        load = subprocess.Popen(
            ["pgbench", "-N", "-n", "-c", str(CLIENTS), "-T", "3600", *_pgbench_args(database)],
            env=_environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(RAMP_SECONDS)
            before, started = _history_rows(database), time.monotonic()
            loaded = drains.into_running(runner, count, "load.loaded", label)
            writes = _history_rows(database) - before
            loaded.numbers["pgbench_tps"] = round(writes / (time.monotonic() - started))
        finally:
            load.terminate()
            load.wait(30)
    return [quiet, loaded]
