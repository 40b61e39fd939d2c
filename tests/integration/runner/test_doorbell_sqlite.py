"""A runner's doorbell on SQLite: it binds a socket in the database's doorbell directory,
wakes when it is rung, binds again when the file vanishes, removes it when it stops,
and, when it cannot listen, says so once and polls. The ringing side is
tests/integration/enqueue/test_wakeup_sqlite.py."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Iterator

import pytest

from jobs.models import Job, State
from jobs.notifier import sqlite_doorbell
from jobs.runner import Runner
from jobs.stopping import Stopping
from jobs.wakeup import CONFIG_NOTICE
from tests.doorbells import doorbell_directory, only_sqlite  # noqa: F401 (a fixture)
from tests.factories import add_ready_job
from tests.helpers import running, wait_until
from tests.integration.runner.support import WAIT, events

pytestmark = [pytest.mark.django_db(transaction=True), only_sqlite]


@pytest.fixture
def listening_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="jobs")
    return caplog


def sockets(directory: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if n.endswith(sqlite_doorbell.SUFFIX))
    except FileNotFoundError:
        return []


def done(job: Job) -> bool:
    return Job.objects.get(pk=job.pk).state == State.DONE


def test_a_stopped_runner_removes_its_socket_and_the_last_one_the_directory(
    directory, listening_log
):
    first, second = Runner(), Runner()
    with running(second):
        with running(first):
            wait_until(lambda: len(sockets(directory)) == 2, WAIT, "each runner binds one")
        first.close()
        assert len(sockets(directory)) == 1, "the stopped runner's socket is gone"
    second.close()
    assert not os.path.exists(directory), "the last runner to stop leaves nothing behind"


class Listening:
    """`sqlite_doorbell.listen` on a thread of its own, as a runner's listener runs it."""

    def __init__(self, directory: str) -> None:
        self.stopping = Stopping()
        self.channels: queue.Queue[str] = queue.Queue()
        self.heard: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self._listen, args=[directory], daemon=True)
        self.thread.start()

    def _listen(self, directory: str) -> None:
        for payload in sqlite_doorbell.listen(directory, self.stopping, self.channels.put):
            self.heard.put(payload)

    def next_heard(self) -> str:
        return self.heard.get(timeout=WAIT)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the listener stops when asked"


@pytest.fixture
def listener(directory: str) -> Iterator[Listening]:
    started = Listening(directory)
    yield started
    started.stop()


def test_a_listener_hears_each_ring_with_its_payload(directory, listener):
    path = listener.channels.get(timeout=WAIT)
    assert [os.path.join(directory, name) for name in sockets(directory)] == [path]
    sqlite_doorbell.ring(directory, "")
    assert listener.next_heard() == ""
    sqlite_doorbell.ring(directory, CONFIG_NOTICE)
    assert listener.next_heard() == CONFIG_NOTICE


def test_a_listener_whose_socket_file_vanishes_binds_a_new_one_that_rings_reach(
    directory, listener, listening_log
):
    """As a temp cleaner removes an old file: rings would no longer reach it."""
    listener.channels.get(timeout=WAIT)
    [lost] = sockets(directory)
    os.unlink(os.path.join(directory, lost))
    assert listener.next_heard() == "", "work may have rung the lost socket: it looks"
    [rebound] = events(listening_log, "runner_doorbell_rebound")
    [bound] = sockets(directory)
    assert bound != lost
    assert getattr(rebound, "fields", {})["path"] == os.path.join(directory, bound)
    sqlite_doorbell.ring(directory, CONFIG_NOTICE)
    assert listener.next_heard() == CONFIG_NOTICE, "a ring reaches the new socket"


def test_a_runner_whose_doorbell_directory_cannot_be_used_says_so_once_and_runs_jobs_at_its_poll(
    directory, make_runner, listening_log
):
    with open(directory, "w") as blocker:  # a file where the directory should be
        blocker.write("not a directory")
    runner = make_runner()  # the 20 ms poll of these tests
    with running(runner):
        wait_until(lambda: events(listening_log, "runner_doorbell_unavailable"), WAIT, "it says so")
        job = add_ready_job("test.record", "polled")
        wait_until(lambda: done(job), WAIT, "the runner found the job at its poll")
        passes = runner.passes
        wait_until(lambda: runner.passes >= passes + 5, WAIT, "and went on polling")
    [unavailable] = events(listening_log, "runner_doorbell_unavailable")
    assert unavailable.levelno == logging.WARNING
    assert getattr(unavailable, "fields", {})["outcome"] == "polling"
    assert not events(listening_log, "runner_listening")
    assert not events(listening_log, "runner_listener_lost"), "nothing is retried and logged"
