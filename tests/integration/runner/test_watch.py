"""The runner's watch over its attempts' time (`jobs.runner.watch`): heartbeat
leases renewed while an attempt runs and fenced on it, and a hung handler
that makes its runner give up."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from jobs.registry import Registry
from tests.helpers import running, wait_until
from tests.integration.runner.support import Blocks, Recording, install

pytestmark = pytest.mark.django_db(transaction=True)


def lease_of(key: str) -> Any:
    return Job.objects.get(key=key).lease_expires_at


def test_a_running_attempts_lease_is_renewed_every_heartbeat_and_never_runs_out(
    blocked: Blocks, registry: Registry, make_runner, configure
):
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert blocked.wait_running(1)
        first = lease_of("long")
        assert first - timezone.now() <= timedelta(seconds=3), "three heartbeats at claim"
        seen = [first]
        for _ in range(3):
            assert wait_until(lambda: lease_of("long") > seen[-1], 5), "renewed"
            seen.append(lease_of("long"))
            assert seen[-1] > timezone.now(), "the lease never runs out while it runs"
        blocked.release.set()
        assert wait_until(lambda: Job.objects.get(key="long").state == State.DONE, 5), (
            "the settle, fenced on the renewed lease, still wins"
        )
    assert len(blocked.runs) == 1


def test_a_renewal_never_revives_a_row_another_runner_took_or_an_operator_cancelled(
    blocked: Blocks, registry: Registry, make_runner, configure
):
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "taken"))
    assert enqueue(JobSpec.now(Blocks.kind, "cancelled"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert blocked.wait_running(2)
        taken_until = timezone.now() + timedelta(hours=1)
        Job.objects.filter(key="taken").update(attempts=2, lease_expires_at=taken_until)
        Job.objects.filter(key="cancelled").update(state=State.CANCELLED, lease_expires_at=None)
        passes = runner.passes
        assert wait_until(lambda: runner.passes > passes + 2 and runner.watch._renewed_at, 5)
        renewed_at = runner.watch._renewed_at
        assert wait_until(lambda: runner.watch._renewed_at != renewed_at, 5), "a renewal ran"
        taken, cancelled = Job.objects.get(key="taken"), Job.objects.get(key="cancelled")
        assert taken.lease_expires_at == taken_until, "the other runner's lease is untouched"
        assert (cancelled.state, cancelled.lease_expires_at) == (State.CANCELLED, None)
        blocked.release.set()


class Hangs(Recording):
    """Never returns until the test lets it: a handler stuck on a dead upstream."""

    kind = "test.hangs"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def lease(self) -> timedelta:
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
