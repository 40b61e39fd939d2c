"""An attempt's time budget: an overrun is settled without the handler, its late result
discarded, and the lease written on the row outlasts the budget. The async budget
is the one rule here under a real clock: it must really cancel."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from freezegun import freeze_time

from jobs import Done, Failed, JobHandler, JobSpec, enqueue
from jobs.models import Job, State
from tests.helpers import wait_until
from tests.integration.runner.support import T0, WAIT, Blocks, Recording, events, install, the_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_overrunning_attempt_is_settled_as_a_timed_out_retry_and_its_late_result_discarded(
    registry, make_runner, configure, caplog
):
    """A thread cannot be cancelled, so the row is settled without it and the slot freed."""
    configure(max_attempts=5, max_concurrent=4)

    class Overruns(Blocks):
        kind = "test.overruns"

        def budget(self) -> timedelta:
            return timedelta(seconds=1)

    handler = install(registry, Overruns)
    runner = make_runner(registry=registry)
    try:
        with freeze_time(T0) as frozen:
            assert enqueue(JobSpec.now(Overruns.kind, "k"))
            assert runner.run_pass() == (1, 4)
            assert handler.started.wait(WAIT), "the attempt started"
            frozen.tick(timedelta(seconds=2))

            assert runner.run_pass() == (0, 4), "the timed-out attempt no longer holds a slot"
            assert runner.in_flight() == [], "the overrunning attempt was let go"
            job = the_job(Overruns.kind)
            assert handler.running == 1, "the handler is still running"
            assert job.state == State.QUEUED, "the row was settled while the handler ran"
            assert "timed out" in job.last_error
            assert job.attempts == 1

            handler.release.set()
            runner.close()  # joins the worker, so its late Done has been dealt with
    finally:
        handler.release.set()

    job = the_job(Overruns.kind)
    assert job.state == State.QUEUED, "the late Done was discarded, not written"
    assert "timed out" in job.last_error
    assert job.finished_at is None
    assert events(caplog, "job_result_discarded"), "the discarded result is logged"


def test_a_last_attempt_that_overruns_is_retired_and_abandoned_once_despite_its_late_result(
    registry, make_runner, configure
):
    configure(max_attempts=1)

    class OverrunsThenFails(Blocks):
        kind = "test.overruns_then_fails"

        def budget(self) -> timedelta:
            return timedelta(seconds=1)

        def run(self, job: Job) -> Any:
            super().run(job)
            return Failed("too late to matter")

    handler = install(registry, OverrunsThenFails)
    runner = make_runner(registry=registry)
    try:
        with freeze_time(T0) as frozen:
            assert enqueue(JobSpec.now(OverrunsThenFails.kind, "k"))
            runner.run_pass()
            assert handler.started.wait(WAIT), "the attempt started"
            frozen.tick(timedelta(seconds=2))
            runner.run_pass()

            assert the_job(OverrunsThenFails.kind).state == State.FAILED, (
                "a timeout on the last attempt retires the job"
            )
            assert len(handler.abandoned) == 1, "and abandons it at once"

            handler.release.set()
            runner.close()  # joins the worker, so its late Failed has been dealt with
    finally:
        handler.release.set()

    assert len(handler.abandoned) == 1, "the late Failed does not abandon the job a second time"
    assert "timed out" in the_job(OverrunsThenFails.kind).last_error


@pytest.mark.parametrize(
    ("heartbeat_seconds", "lease_ends"),
    [
        # Heartbeats off: the lease is the budget and a margin.
        (0, None),
        # On: three heartbeats, renewed while the attempt runs.
        (10, T0 + timedelta(seconds=30)),
    ],
)
def test_the_lease_written_at_claim_is_the_budget_and_a_margin_or_three_heartbeats(
    registry, make_runner, configure, heartbeat_seconds, lease_ends
):
    """Without heartbeats, the runner's own timeout must fire before another
    runner may take the row; with them, the row comes back three heartbeats
    after its runner stops renewing it."""
    configure(lease_seconds=300, heartbeat_seconds=heartbeat_seconds)
    budget = timedelta(seconds=60)

    class Budgeted(Recording):
        kind = "test.budgeted"

        def __init__(self) -> None:
            super().__init__()
            self.leases: list[datetime | None] = []

        def budget(self) -> timedelta:
            return budget

        def run(self, job: Job) -> Any:
            self.leases.append(Job.objects.get(id=job.id).lease_expires_at)
            return Done()

    handler = install(registry, Budgeted)
    runner = make_runner(registry=registry)
    with freeze_time(T0):
        assert enqueue(JobSpec.now(Budgeted.kind, "k"))
        runner.drain()

    [lease] = handler.leases
    assert lease is not None
    if lease_ends is not None:
        assert lease == lease_ends, "three heartbeats from the claim"
        return
    assert lease > T0 + budget, "the lease is longer than the attempt's budget"
    assert lease < T0 + timedelta(seconds=300), (
        "the handler's lease() sets the budget, not lease_seconds"
    )


def test_an_async_run_that_overruns_its_budget_is_really_cancelled(
    registry, make_runner, configure
):
    configure(max_attempts=5)

    class SlowAsync(JobHandler):
        kind = "test.slow_async"

        def __init__(self) -> None:
            self.ran_past_the_sleep = False
            self.cancelled = threading.Event()

        def budget(self) -> timedelta:
            return timedelta(seconds=0.2)

        async def run(self, job: Job) -> Any:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            self.ran_past_the_sleep = True
            return Done()

    handler = install(registry, SlowAsync)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(SlowAsync.kind, "k"))
    runner.drain()

    assert handler.cancelled.wait(WAIT), "the coroutine was cancelled at its budget"
    runner.close()
    assert handler.ran_past_the_sleep is False, "no code after the await ran"
    job = the_job(SlowAsync.kind)
    assert job.state == State.QUEUED, "the cancelled attempt is retried"
    assert job.attempts == 1
    assert "timed out" in job.last_error


def test_a_done_awaiting_its_batch_when_its_budget_passes_keeps_its_slot_until_the_batch_settles(
    registry, make_runner, configure
):
    """The worker handed its `Done` over before the budget passed, so the next
    pass settles it in its batch; until then it still holds its slot, and that
    pass claims no more rows than `max_concurrent` leaves free."""
    configure(max_concurrent=1)

    class QuickDone(Recording):
        kind = "test.quick_done"

        def budget(self) -> timedelta:
            return timedelta(seconds=1)

    install(registry, QuickDone)
    for n in range(3):
        assert enqueue(JobSpec.now(QuickDone.kind, f"k{n}"))
    moment = [timezone.now()]
    runner = make_runner(registry=registry, clock=lambda: moment[0])

    assert runner.run_pass() == (1, 1)
    assert wait_until(
        lambda: runner.completer.waiting() == 1 and runner.pool.idle() == runner.pool.size
    ), "the attempt ended Done and waits for the next pass's batch"
    moment[0] += timedelta(milliseconds=1500)  # past the budget, within the lease

    assert runner.run_pass() == (1, 1), "one slot: the batch frees it, and one row is claimed"
    assert len(runner.in_flight()) == 1
    assert Job.objects.filter(state=State.DONE).count() == 1, "the batch settled the Done"


def test_a_handler_still_naming_its_budget_lease_keeps_that_budget_with_a_deprecation_warning(
    registry, make_runner, configure
):
    configure(lease_seconds=300)
    with pytest.warns(DeprecationWarning, match=r"lease\(\) is deprecated: rename it budget\(\)"):

        class OldName(Recording):
            kind = "test.old_name"

            def lease(self) -> timedelta:
                return timedelta(seconds=7)

    handler = OldName()
    assert handler.budget() == timedelta(seconds=7), "lease() is its budget"
    with pytest.warns(DeprecationWarning, match=r"call budget\(\)"):
        assert JobHandler.lease(handler) is None, "calling up reaches the default budget"
    install(registry, OldName)
    runner = make_runner(registry=registry)
    budgets = runner.executor.budgets(runner.settings(), T0)
    assert budgets[OldName.kind] == timedelta(seconds=7), "what the runner claims and runs under"


def test_calling_lease_on_a_handler_is_deprecated_and_answers_its_budget():
    class NewName(JobHandler):
        kind = "test.new_name"

        def budget(self) -> timedelta:
            return timedelta(seconds=9)

    with pytest.warns(DeprecationWarning, match=r"call budget\(\)"):
        assert NewName().lease() == timedelta(seconds=9)
