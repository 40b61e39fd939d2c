"""The runner's watch over its attempts' time (`jobs.runner.watch`): a hung
handler that makes its runner give up. Leases renewed while an attempt runs
are the heartbeat's (test_heartbeat.py)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from jobs.registry import Registry
from tests.helpers import running, wait_until
from tests.integration.runner.support import Recording, install

pytestmark = pytest.mark.django_db(transaction=True)


class Hangs(Recording):
    """Never returns until the test lets it: a handler stuck on a dead upstream."""

    kind = "test.hangs"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def budget(self) -> timedelta:
        return timedelta(seconds=1)

    def run(self, job: Any) -> Any:
        self.runs.append((job.key, job.attempts))
        self.release.wait(30)
        return None


def test_a_handler_hung_past_its_budget_and_hard_kill_after_makes_its_runner_give_up(
    registry: Registry, make_runner, configure, caplog
):
    configure(hard_kill_after=1, retry_base_seconds=60)
    hangs = install(registry, Hangs)
    assert enqueue(JobSpec.now(Hangs.kind, "stuck"))
    runner = make_runner(registry=registry)
    thread = threading.Thread(target=runner.run)
    thread.start()
    try:
        thread.join(15)
        assert not thread.is_alive(), "the runner stopped claiming and its loop ended"
    finally:
        hangs.release.set()
        runner.stop()
        thread.join(5)
    assert runner.watch.hung_attempt is not None
    job = Job.objects.get(key="stuck")
    assert (job.state, job.attempts) == (State.QUEUED, 1), "timed out at its budget: a retry"
    assert job.attempt_history[-1].outcome == "timed_out"
    assert "runner_hard_limit" in caplog.text
    assert "exits to be replaced" in caplog.text


def test_with_hard_kill_after_zero_a_hung_handler_never_stops_its_runner(
    registry: Registry, make_runner, configure
):
    configure(hard_kill_after=0, retry_base_seconds=60)
    hangs = install(registry, Hangs)
    assert enqueue(JobSpec.now(Hangs.kind, "stuck"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert wait_until(lambda: Job.objects.get(key="stuck").state == State.QUEUED, 5)
        passes = runner.passes
        assert wait_until(lambda: runner.passes > passes + 50, 10), "it goes on claiming"
        assert runner.watch.hung_attempt is None
        hangs.release.set()
