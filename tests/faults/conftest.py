"""Fixtures for the fault suite: the private PostgreSQL cluster that the database
scenarios restart and stop (never the shared one on 5432), and runners on it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import ROOT, RunJobs

PRIVATE_PORT = int(os.environ.get("FAULTS_PG_PORT", "5433"))
PRIVATE_URL = f"postgres://postgres@127.0.0.1:{PRIVATE_PORT}/faults"
PRIVATE_DSN = f"host=127.0.0.1 port={PRIVATE_PORT} user=postgres dbname=faults"


def _version() -> str:
    return sorted(os.listdir("/etc/postgresql"), key=lambda v: [int(p) for p in v.split(".")])[-1]


class PrivateCluster:
    """The cluster `faults` on 127.0.0.1:5433, created by `.ci/faults-db`."""

    url = PRIVATE_URL

    def ctl(self, action: str, *options: str) -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", *options, _version(), "faults", action],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def restart(self) -> None:
        self.ctl("restart")

    def stop(self) -> None:
        self.ctl("stop")

    def crash(self) -> None:
        """Stop the cluster in immediate mode: every server process quits at once,
        nothing is flushed or checkpointed, and the next start replays the WAL, as
        after a PostgreSQL crash. What a commit left in the WAL buffers unwritten
        (one that did not wait for the flush) is gone."""
        self.ctl("stop", "--mode", "immediate")

    def start(self) -> None:
        if not self.ready():
            self.ctl("start")
        give_up = time.monotonic() + 30
        while not self.ready() and time.monotonic() < give_up:
            time.sleep(0.2)

    def server_log(self) -> Path:
        """The cluster's server log, as `pg_lsclusters` names it."""
        listing = subprocess.run(
            ["pg_lsclusters", "-h", _version(), "faults"],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split()
        return Path(listing[-1])

    def ready(self) -> bool:
        return (
            subprocess.run(
                ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(PRIVATE_PORT)], timeout=10
            ).returncode
            == 0
        )

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(PRIVATE_DSN, autocommit=True, connect_timeout=5)

    def query(self, sql: str, params: list[object] | None = None) -> list[tuple[Any, ...]]:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def reset(self) -> None:
        """Empty the tables a scenario writes, config row included (runners recreate it
        from their `JOBS_*` environment)."""
        with self.connect() as conn:
            conn.execute(
                "TRUNCATE jobs_job, jobs_jobsconfig, jobs_runnerprocess, "
                "jobapp_execution, jobapp_abandonment"
            )

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run `manage.py` against the private database; its output."""
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env={**os.environ, **self.env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"manage.py {args[0]} succeeds:\n{done.stdout}{done.stderr}"
        return done.stdout

    def env(self) -> dict[str, str]:
        return {"DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": PRIVATE_URL}

    def enqueue_many(
        self,
        count: int,
        kind: str,
        payload: Mapping[str, object],
        *,
        env: dict[str, str],
        max_attempts: int | None = None,
    ) -> set[uuid.UUID]:
        """Queue `count` jobs `job-0`... of `kind` through `enqueue_many` in a
        `manage.py shell` of the scenario's environment; their ids."""
        budget = "" if max_attempts is None else f".with_max_attempts({max_attempts})"
        self.manage(
            "shell",
            "-c",
            "from jobs import JobSpec; from jobs.queue import enqueue_many; "
            f"enqueue_many([JobSpec.now({kind!r}, f'job-{{n}}').with_payload({payload!r})"
            f"{budget} for n in range({count})])",
            env=env,
        )
        rows = self.query("SELECT id FROM jobs_job WHERE kind = %s", [kind])
        assert len(rows) == count, f"all {count} jobs are queued"
        return {row[0] for row in rows}


@pytest.fixture(scope="session")
def private_cluster() -> Iterator[PrivateCluster]:
    """Create (if missing), start and migrate the private cluster, via `.ci/faults-db`."""
    subprocess.run(
        [str(ROOT / ".ci" / "faults-db")],
        check=True,
        env={**os.environ, "FAULTS_PYTHON": sys.executable, "FAULTS_PG_PORT": str(PRIVATE_PORT)},
        timeout=180,
    )
    cluster = PrivateCluster()
    yield cluster
    cluster.start()  # a scenario that failed half-way must not leave it down


@pytest.fixture
def cluster(private_cluster: PrivateCluster) -> Iterator[PrivateCluster]:
    """The private cluster, up and emptied for this test, and up again afterwards."""
    private_cluster.start()
    private_cluster.reset()
    yield private_cluster
    private_cluster.start()


@pytest.fixture
def private_runjobs(
    tmp_path: Path, private_cluster: PrivateCluster
) -> Iterator[Callable[..., RunJobs]]:
    """Like `runjobs`, with the processes on the private cluster."""
    started: list[RunJobs] = []

    def start(*args: str, env: dict[str, str] | None = None) -> RunJobs:
        process = RunJobs(*args, tmp_path=tmp_path, env={**private_cluster.env(), **(env or {})})
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
