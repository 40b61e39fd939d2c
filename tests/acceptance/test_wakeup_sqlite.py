"""Cross-process wake-up on SQLite: a `runjobs` process on the same database file starts
a job enqueued in another process (this one) within milliseconds, not at its next
poll, and applies a config saved there at once; a killed runner's socket costs the
next enqueue nothing."""

from __future__ import annotations

import os
import time

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from jobs.notifier import sqlite_doorbell
from tests.doorbells import doorbell_directory, only_sqlite  # noqa: F401 (a fixture)
from tests.factories import add_ready_job
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), only_sqlite]

#: Long enough that only a wake-up, never a poll, can explain a prompt start.
AN_HOUR_MS = 3_600_000
#: And the runner's own config check, which could explain a prompt config change.
QUIET = {"JOBS_CONFIG_CHECK_SECONDS": "3600"}


def sockets(directory: str) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(sqlite_doorbell.SUFFIX)]


def wait_for_listening(process) -> None:
    assert wait_until(lambda: "runner_listening" in process.output(), 20), process.output()
    time.sleep(0.2)  # let the pass its listening asks for end, so it cannot take the job


def test_a_job_enqueued_in_another_process_starts_at_once_despite_an_hour_long_poll(
    directory, runjobs, configure
):
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env=QUIET)
    wait_for_listening(process)
    assert len(sockets(directory)) == 1, "the runner listens in the database's doorbell directory"
    assert enqueue(JobSpec.now("test.record", "web"))
    assert wait_until(lambda: Execution.objects.filter(key="web").exists(), 5), process.output()
    assert "runner_doorbell_unavailable" not in process.output()


def test_a_config_saved_in_another_process_reaches_the_runner_at_once(
    directory, runjobs, configure
):
    """The save rings with the config notice: the runner reads the row, so its new
    50 ms poll finds a job that rang nothing, where the hour-long one would not."""
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env=QUIET)
    wait_for_listening(process)
    configure(poll_interval_ms=50)
    job = add_ready_job("test.record", "polled")  # written without ringing anything
    assert wait_until(lambda: Job.objects.get(pk=job.pk).state == State.DONE, 5), process.output()


def test_a_killed_runners_socket_is_removed_by_the_next_enqueue_which_succeeds(
    directory, runjobs, configure
):
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env=QUIET)
    wait_for_listening(process)
    [left] = sockets(directory)
    process.kill()  # SIGKILL: no chance to remove its socket
    assert sockets(directory) == [left], "the dead runner left its socket behind"
    assert enqueue(JobSpec.now("test.record", "after"))
    assert sockets(directory) == [], "the enqueue's ring removed it"
    assert Job.objects.filter(key="after").exists()


def test_a_runner_stopped_by_sigterm_removes_its_socket(directory, runjobs, configure):
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env=QUIET)
    wait_for_listening(process)
    process.process.terminate()
    assert process.wait(30) == 0, process.output()
    assert not os.path.exists(directory), "nothing is left in the temp dir"
