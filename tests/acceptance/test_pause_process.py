"""Pausing a queue from the CLI while a real runner drains it: no new attempt
starts once the pause has reached the runner, running ones finish, a resume
drains the rest; and a pause survives the runner's restart."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from jobs import JobSpec, enqueue_many
from jobs.models import Job
from tests.conftest import ROOT, database_url
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = 80


def jobs_command(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "jobs", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DATABASE_URL": database_url()},
    )


def queue_slow_jobs() -> None:
    specs = [
        JobSpec(kind="test.sleep", key=f"slow-{n}", payload={"seconds": 0.3}, queue="slow")
        for n in range(JOBS)
    ]
    assert all(enqueue_many(specs))


def started() -> int:
    return Execution.objects.filter(key__startswith="slow-").count()


@pytest.mark.parametrize(
    ("scope", "name", "applied"),
    [
        ("queue", "slow", "runner_controls_applied paused_queues=slow "),
        ("kind", "test.sleep", "paused_kinds=test.sleep "),
    ],
)
def test_a_queue_or_kind_paused_while_it_drains_starts_nothing_new_and_a_resume_drains_it(
    runjobs, scope, name, applied
):
    queue_slow_jobs()
    runner = runjobs(env={"TEST_SLEEP_LEASE": "30"})
    wait_until(lambda: started() >= 3, 60, "the runner is draining")

    paused = jobs_command("pause", f"--{scope}", name, "--by", "cli:tester")
    assert paused.returncode == 0, paused.stderr
    assert f"paused {scope} {name} (by cli:tester)" in paused.stdout
    wait_until(lambda: applied in runner.output(), 30, "the pause reaches the runner")
    time.sleep(0.5)  # attempts claimed before the pause finish
    after_pause = started()
    time.sleep(1.5)

    assert started() == after_pause, "no new attempt started once the pause had reached it"
    assert after_pause < JOBS, "jobs were left waiting"
    assert Job.objects.filter(queue="slow", state="queued", attempts=0).count() == (
        JOBS - after_pause
    ), "the waiting jobs are queued, their attempts unspent"

    resumed = jobs_command("resume", f"--{scope}", name, "--by", "cli:tester")
    assert resumed.returncode == 0, resumed.stderr
    wait_until(
        lambda: Job.objects.filter(queue="slow", state="done").count() == JOBS, 60, "drained"
    )
    runner.process.send_signal(signal.SIGTERM)
    assert runner.wait(30) == 0, runner.output()


def test_a_pause_survives_a_runner_restart(runjobs):
    paused = jobs_command("pause", "--queue", "slow")
    assert paused.returncode == 0, paused.stderr
    queue_slow_jobs()

    runner = runjobs("--burst")

    assert runner.wait(60) == 0, runner.output()
    assert started() == 0, "a runner started after the pause claims nothing of the queue"
    assert "paused_queues=slow" in runner.output()
    jobs_command("resume", "--queue", "slow")
    again = runjobs("--burst")
    assert again.wait(120) == 0, again.output()
    assert started() == JOBS


@pytest.mark.skipif(
    connection.vendor == "mysql",
    reason="MySQL wakes no runner across processes: a pause reaches it at its config check",
)
def test_a_pause_reaches_a_running_runner_at_once_where_saves_wake_runners(runjobs, configure):
    """PostgreSQL's NOTIFY and SQLite's doorbell carry a control's save as they
    carry the config row's: with the config check an hour away and the poll a
    minute, the runner applies the pause within seconds."""
    configure(poll_interval_ms=60_000)
    runner = runjobs(env={"JOBS_CONFIG_CHECK_SECONDS": "3600"})
    wait_until(lambda: "runner_started" in runner.output(), 30, "the runner is up")

    paused = jobs_command("pause", "--queue", "slow")

    assert paused.returncode == 0, paused.stderr
    wait_until(
        lambda: "runner_controls_applied paused_queues=slow" in runner.output(),
        10,
        "the pause reaches the runner long before its config check",
    )
    runner.process.send_signal(signal.SIGTERM)
    assert runner.wait(30) == 0, runner.output()
