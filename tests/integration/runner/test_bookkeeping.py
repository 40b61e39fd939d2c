"""A pass's own round trips (the periodic config re-read, the heartbeat) come
after its claims are handed on, so a job that wakes the runner never waits for
them; a reload someone asked for is still read before the claim."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from freezegun import freeze_time

from jobs import JobSpec, enqueue
from jobs.config import JobsSettings
from jobs.live_config import LiveConfig
from jobs.models import RunnerProcess
from tests.integration.runner.support import T0, Succeeds, install

pytestmark = pytest.mark.django_db(transaction=True)


class Order:
    """Records, in order, each config read and each claim of a runner."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self._live = LiveConfig()

    def settings(self) -> JobsSettings:
        self.steps.append("config")
        return self._live()

    def watch(self, runner: Any) -> None:
        claim = runner.store.settle_and_claim

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.steps.append("claim")
            return claim(*args, **kwargs)

        runner.store.settle_and_claim = recorded

        beat = runner.presence.beat

        def beating(*args: Any, **kwargs: Any) -> Any:
            due = runner.presence.row is not None and (
                runner.clock() - runner.presence.row.heartbeat_at >= RunnerProcess.HEARTBEAT
            )
            if due:
                self.steps.append("heartbeat")
            return beat(*args, **kwargs)

        runner.presence.beat = beating


def watched_with_a_job(registry: Any, make_runner: Any) -> tuple[Any, Order]:
    """A runner whose config reads and claims are recorded, and one ready job."""
    install(registry, Succeeds)
    order = Order()
    runner = make_runner(registry=registry, settings=order.settings)
    order.watch(runner)
    assert enqueue(JobSpec.now(Succeeds.kind, "k"))
    order.steps.clear()
    return runner, order


def test_a_pass_due_to_reread_the_config_claims_first_and_reads_it_after_the_hand_off(
    registry, make_runner
):
    runner, order = watched_with_a_job(registry, make_runner)

    runner.ticker.due.set()  # what the config ticker does every JOBS_CONFIG_CHECK_SECONDS
    claimed, _ = runner.run_pass()

    assert (claimed, order.steps) == (1, ["claim", "config"])
    assert not runner.ticker.due.is_set(), "read in that pass, so not again in the next"


def test_a_reload_someone_asked_for_is_read_before_the_claim(registry, make_runner):
    runner, order = watched_with_a_job(registry, make_runner)

    runner.reload()  # SIGHUP, or another process's notice
    runner.run_pass()

    assert order.steps == ["config", "claim"]


def test_a_heartbeat_that_falls_due_is_written_after_the_claim_and_counts_its_attempts(
    registry, make_runner
):
    install(registry, Succeeds)
    with freeze_time(T0) as clock:
        order = Order()
        runner = make_runner(registry=registry, settings=order.settings)
        runner.presence.register([Succeeds.kind], 4)
        order.watch(runner)
        assert enqueue(JobSpec.now(Succeeds.kind, "k"))
        clock.tick(RunnerProcess.HEARTBEAT + timedelta(seconds=1))
        order.steps.clear()

        runner.run_pass()

    assert order.steps == ["claim", "heartbeat"]
    beat = RunnerProcess.objects.get(pk=runner.presence.row.pk)
    assert (beat.heartbeat_at, beat.running) == (
        T0 + RunnerProcess.HEARTBEAT + timedelta(seconds=1),
        1,
    )
