"""Recover: every handler's runs once at start-up, before any claim, in one lane of a
process only, and a failing one holds up nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from jobs import Done, JobHandler, JobSpec, enqueue
from jobs.models import Job, State
from tests.integration.runner.support import Reschedules, Succeeds, events, install, the_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_handlers_recover_runs_exactly_once_at_start_up_before_any_claim(
    registry, make_runner
):
    log: list[str] = []

    class First(JobHandler):
        kind = "test.first"

        def run(self, job: Job) -> Any:
            log.append(f"run {job.kind}:{job.key}")
            return Done()

        def recover(self) -> None:
            log.append(f"recover {self.kind}")
            enqueue(JobSpec.now(self.kind, "recovered"))

    class Second(First):
        kind = "test.second"

    registry.register(First)
    registry.register(Second)
    assert enqueue(JobSpec.now(First.kind, "waiting"))
    runner = make_runner(registry=registry)
    runner.drain()

    recovers = [entry for entry in log if entry.startswith("recover")]
    assert sorted(recovers) == ["recover test.first", "recover test.second"], (
        "each handler recovers exactly once"
    )
    assert log[:2] == recovers, f"every recover ran before the first claim: {log}"
    assert sorted(log[2:]) == [
        "run test.first:recovered",
        "run test.first:waiting",
        "run test.second:recovered",
    ], "the work recover queued is then run like any other"


def test_recover_in_two_runners_queues_no_duplicate(registry, make_runner):
    class Periodic(Reschedules):
        kind = "test.periodic"

        def __init__(self) -> None:
            super().__init__()
            self.queued: list[bool] = []

        def recover(self) -> None:
            self.queued.append(enqueue(JobSpec.now(self.kind, "x")))

    handler = install(registry, Periodic)
    make_runner(registry=registry).drain()
    make_runner(registry=registry).drain()

    assert handler.queued == [True, False], "the second recover found the identity held"
    assert Job.objects.filter(kind=Periodic.kind).count() == 1, "one live row, not two"


def test_only_lane_zero_calls_recover(registry, make_runner):
    recovered: list[int] = []

    class Counts(Succeeds):
        kind = "test.recover_once"

        def recover(self) -> None:
            recovered.append(1)

    registry.register(Counts)
    for lane in (1, 0):
        make_runner(registry=registry, lane=lane, lanes=2).drain()

    assert recovered == [1], "one process's lanes recover once between them"


def test_a_recover_that_raises_is_logged_and_the_runner_still_drains_other_work(
    registry, make_runner, caplog
):
    class BrokenRecover(Succeeds):
        kind = "test.broken_recover"

        def recover(self) -> None:
            raise RuntimeError("cannot read the orders table")

    install(registry, BrokenRecover)
    handler = install(registry, Succeeds)
    assert enqueue(JobSpec.now(Succeeds.kind, "k"))
    runner = make_runner(registry=registry)
    runner.drain()

    assert the_job(Succeeds.kind).state == State.DONE, "other work still drains"
    assert handler.runs == [("k", 1)]
    failures = events(caplog, "job_recover_failed")
    assert len(failures) == 1
    assert "cannot read the orders table" in failures[0].getMessage()
