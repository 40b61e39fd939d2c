"""An ordinary `manage.py runjobs` process on the benchmark's database, and the
driver's view of it: started, idle, sent a backlog, watched until done.

The runner is the project's own command with nothing added, so a figure
measured through it is one a deployment meets. The driver learns what the
runner did only from the database, by polling counts as a dashboard would.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from django.db import connection

from acmeproxy.benchmarks.jobs import STAMP
from jobs import JobSpec, enqueue
from jobs.models import LIVE_STATES, Job

ROOT = Path(__file__).resolve().parents[3]

#: How often the driver counts unfinished jobs while it waits.
POLL_SECONDS = 0.02
#: How long a part waits for the runner before calling the run a failure.
GIVE_UP_SECONDS = 600.0


class RunnerFailed(RuntimeError):
    """The runner exited, or did not finish its work in time."""


def database_url() -> str:
    """A DATABASE_URL for the database this process is connected to (the test
    database under pytest), for the processes the benchmark starts."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    scheme = {"postgresql": "postgres", "mysql": "mysql"}[connection.vendor]
    user = quote(settings.get("USER") or "", safe="")
    password = settings.get("PASSWORD")
    credentials = f"{user}:{quote(password, safe='')}" if password else user
    host = settings.get("HOST") or "127.0.0.1"
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    return f"{scheme}://{credentials}@{host}{port}/{settings['NAME']}"


def child_env(*, debug: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a process the benchmark starts: this database, and
    `DEBUG` as asked (off unless a part measures it on). Only non-routine
    log lines, since a runner's routine INFO lines would cost it writes."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DEBUG": "True" if debug else "False",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        "JOBS_LOG_LEVEL": "WARNING",
        **extra,
    }


def manage(*args: str, debug: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=child_env(debug=debug),
        stdout=subprocess.DEVNULL,
    )


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of `pid` so far (None without /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Runner:
    """`runjobs` in a process of its own, started and idle when the block begins,
    stopped (SIGTERM, as a deploy stops it) when it ends."""

    def __init__(self, *args: str, debug: bool = False) -> None:
        self.args = args
        self.debug = debug
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Runner:
        self.process = manage("runjobs", *self.args, debug=self.debug)
        self.wait_until_idle()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None, "started"
        return self.process.pid

    def cpu_seconds(self) -> float | None:
        return cpu_seconds(self.pid)

    def wait_until_idle(self) -> None:
        """Until the runner has run a probe job: then it is past start-up, its
        listener is up, and it has nothing else to do. A second probe after a
        pause lets a listener that connected after the first catch up."""
        for pause in (0.0, 0.3):
            time.sleep(pause)
            key = f"probe-{uuid.uuid4().hex}"
            enqueue(JobSpec.now(STAMP, key))
            self._wait_for_probe(key)
        Job.objects.filter(kind=STAMP, key__startswith="probe-").delete()

    def _wait_for_probe(self, key: str) -> None:
        probe = Job.objects.filter(kind=STAMP, key=key, state="done")
        self.wait_for(lambda: not probe.exists())

    def wait_for(self, busy: Callable[[], bool]) -> float:
        """Poll `busy()` until it is false; the time.monotonic() it was first seen false."""
        give_up = time.monotonic() + GIVE_UP_SECONDS
        while busy():
            if self.process is not None and self.process.poll() is not None:
                raise RunnerFailed(f"runjobs exited with status {self.process.returncode}")
            if time.monotonic() > give_up:
                raise RunnerFailed(f"runjobs did not finish within {GIVE_UP_SECONDS:.0f} s")
            time.sleep(POLL_SECONDS)
        return time.monotonic()

    def wait_until_done(self, kind: str, count: int) -> float:
        """Until no job of `kind` is queued or running, seen from this process;
        then checks that `count` are done.

        Each look asks whether one live row is left, which the ready index
        answers at once: counting the done rows instead read the whole
        backlog every 20 ms, taking a share of the database's CPU from the
        drain it was timing."""
        live = Job.objects.filter(kind=kind, state__in=LIVE_STATES)
        finished = self.wait_for(live.exists)
        done = Job.objects.filter(kind=kind, state="done").count()
        if done != count:
            raise RunnerFailed(f"{done} of {count} {kind} jobs ended done")
        return finished
