"""The in-process runner: how each outcome settles, budgets, abandon, recover, and the loop.

These tests drive `jobs.runner.Runner` directly, with handlers defined here and
registered into a fresh registry, so each test sees only its own kinds. The
runner works on real threads with their own connections, so every test commits
for real (`transaction=True`). Time is frozen with freezegun where a rule is
about time; the one exception is the async budget, which must really cancel.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone
from freezegun import freeze_time

from jobs import Done, Failed, JobHandler, JobSpec, Reschedule, Retry, enqueue
from jobs.models import LIVE_STATES, Job, RunnerProcess, State
from jobs.registry import Registry
from jobs.runner import producer, slots
from tests.helpers import wait_until
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
#: How long a test waits for another thread before calling it hung.
WAIT = 10


@pytest.fixture(autouse=True)
def quick_poll(configure: Callable[..., None]) -> None:
    """An idle pass in these tests should not cost the default second."""
    configure(poll_interval_ms=20)


def install[H: JobHandler](registry: Registry, handler_class: type[H]) -> H:
    """Register `handler_class` and return the one instance the runner will call."""
    registry.register(handler_class)
    handler = registry.get(handler_class.kind)
    assert isinstance(handler, handler_class)
    return handler


def the_job(kind: str, key: str = "k") -> Job:
    return Job.objects.get(kind=kind, key=key)


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "jobs" and getattr(r, "event", None) == name]


class Recording(JobHandler):
    """Base for test handlers: keeps every run and every abandon."""

    kind = "test.recording"

    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []
        self.abandoned: list[tuple[str, str]] = []

    def outcome(self, job: Job) -> Any:
        return Done()

    def run(self, job: Job) -> Any:
        self.runs.append((job.key, job.attempts))
        return self.outcome(job)

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned.append((job.key, reason))


class Succeeds(Recording):
    kind = "test.succeeds"


class Retries(Recording):
    kind = "test.retries"
    reason = "the upstream answered 503"

    def outcome(self, job: Job) -> Any:
        return Retry(self.reason)


class Fails(Recording):
    kind = "test.fails"
    reason = "the CA refused the order: badCSR"

    def outcome(self, job: Job) -> Any:
        return Failed(self.reason)


class Reschedules(Recording):
    kind = "test.reschedules"
    delay = timedelta(minutes=15)

    def outcome(self, job: Job) -> Any:
        return Reschedule(self.delay)


class Blocks(Recording):
    """Runs until the test releases it; counts how many attempts run at once."""

    kind = "test.blocks"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Event()
        self._lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0
        self.changed = threading.Condition(self._lock)

    def run(self, job: Job) -> Any:
        with self._lock:
            self.runs.append((job.key, job.attempts))
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.changed.notify_all()
        self.started.set()
        try:
            assert self.release.wait(WAIT), "the test released the handler"
            return Done()
        finally:
            with self._lock:
                self.running -= 1
                self.changed.notify_all()

    def wait_running(self, count: int) -> bool:
        with self._lock:
            return self.changed.wait_for(lambda: self.running >= count, WAIT)


def start_loop(runner: producer.Runner) -> threading.Thread:
    """`runner.run()` on a thread of its own, as `runjobs` runs it, closing the
    thread's connections when it returns."""

    def serve() -> None:
        try:
            runner.run()
        finally:
            connections.close_all()

    loop = threading.Thread(target=serve)
    loop.start()
    return loop


@pytest.fixture
def blocked(registry: Registry) -> Iterator[Blocks]:
    """A blocking handler that is always released at teardown, so no thread is left hanging."""
    handler = install(registry, Blocks)
    yield handler
    handler.release.set()


# -- outcomes ------------------------------------------------------------------------


def test_done_settles_the_row_done_with_its_finished_at(registry, make_runner):
    handler = install(registry, Succeeds)
    runner = make_runner(registry=registry)
    with freeze_time(T0):
        assert enqueue(JobSpec.now(Succeeds.kind, "k"))
        runner.drain()

    job = the_job(Succeeds.kind)
    assert handler.runs == [("k", 1)], "the handler ran once, as attempt 1"
    assert job.state == State.DONE
    assert job.finished_at == T0, "a done row says when it finished"
    assert job.lease_expires_at is None, "a settled row holds no lease"
    assert handler.abandoned == [], "abandon is for retirement, not success"


def test_retry_requeues_after_a_doubling_backoff_capped_at_retry_max_and_keeps_the_reason(
    registry, make_runner, configure
):
    configure(retry_base_seconds=10, retry_max_seconds=25, max_attempts=5)
    handler = install(registry, Retries)
    runner = make_runner(registry=registry)
    with freeze_time(T0) as frozen:
        assert enqueue(JobSpec.now(Retries.kind, "k"))
        for attempt, backoff in ((1, 10), (2, 20), (3, 25)):
            runner.drain()
            job = the_job(Retries.kind)
            now = timezone.now()
            assert job.state == State.QUEUED, f"attempt {attempt} went back in the queue"
            assert job.attempts == attempt
            assert job.run_at == now + timedelta(seconds=backoff), (
                f"after attempt {attempt} the next run waits {backoff}s "
                "(retry_base * 2^(attempt-1), capped at retry_max)"
            )
            assert job.last_error == Retries.reason, "the retry's reason is kept in last_error"
            frozen.tick(timedelta(seconds=backoff))

    assert [n for _, n in handler.runs] == [1, 2, 3]
    assert handler.abandoned == [], "abandon is never called between retries"


def test_a_retry_on_the_last_attempt_retires_the_job_and_abandons_it_exactly_once(
    registry, make_runner, configure
):
    configure(retry_base_seconds=10, retry_max_seconds=10, max_attempts=3)
    handler = install(registry, Retries)
    runner = make_runner(registry=registry)
    with freeze_time(T0) as frozen:
        assert enqueue(JobSpec.now(Retries.kind, "k"))
        for attempt in (1, 2):
            runner.drain()
            assert the_job(Retries.kind).state == State.QUEUED
            assert handler.abandoned == [], f"no abandon after attempt {attempt} of 3"
            frozen.tick(timedelta(seconds=10))
        runner.drain()
        frozen.tick(timedelta(hours=1))
        runner.drain()

    job = the_job(Retries.kind)
    assert job.state == State.FAILED, "the last attempt's Retry retires the job"
    assert job.attempts == 3
    assert job.finished_at is not None
    assert len(handler.abandoned) == 1, "abandon fires exactly once, when the attempts run out"
    key, reason = handler.abandoned[0]
    assert key == "k"
    assert Retries.reason in reason, "abandon is told the handler's own reason"
    assert Retries.reason in job.last_error
    assert len(handler.runs) == 3, "a retired job is never run again"


def test_failed_retires_at_once_and_abandons_exactly_once(registry, make_runner, configure):
    configure(max_attempts=5)
    handler = install(registry, Fails)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(Fails.kind, "k"))
    runner.drain()
    runner.drain()

    job = the_job(Fails.kind)
    assert job.state == State.FAILED, "Failed does not spend the remaining attempts"
    assert job.attempts == 1
    assert job.last_error == Fails.reason
    assert job.finished_at is not None
    assert handler.abandoned == [("k", Fails.reason)], "abandon fires once, with the reason"
    assert enqueue(JobSpec.now(Fails.kind, "k")), "a retired job releases its identity"


def test_a_retry_whose_next_run_would_fall_after_the_deadline_retires_instead(
    registry, make_runner, configure
):
    configure(retry_base_seconds=10, retry_max_seconds=10, max_attempts=5)
    handler = install(registry, Retries)
    runner = make_runner(registry=registry)
    with freeze_time(T0):
        spec = JobSpec.now(Retries.kind, "k").with_deadline(T0 + timedelta(seconds=5))
        assert enqueue(spec)
        runner.drain()

    job = the_job(Retries.kind)
    assert job.state == State.FAILED, "no retry is scheduled past the deadline"
    assert job.attempts == 1, "attempts were left, but the deadline came first"
    assert "deadline" in job.last_error
    assert Retries.reason in job.last_error
    assert len(handler.abandoned) == 1, "the retirement is abandoned exactly once"
    assert Retries.reason in handler.abandoned[0][1]


def test_reschedule_keeps_the_row_live_with_a_fresh_budget_and_never_abandons(
    registry, make_runner, configure
):
    configure(max_attempts=2)
    handler = install(registry, Reschedules)
    runner = make_runner(registry=registry)
    with freeze_time(T0):
        assert enqueue(JobSpec.now(Reschedules.kind, "k"))
        runner.drain()

    job = the_job(Reschedules.kind)
    assert job.state == State.QUEUED, "a rescheduled job stays live"
    assert job.attempts == 0, "each occurrence gets a fresh attempt budget"
    assert job.run_at == T0 + Reschedules.delay, "the next occurrence is now + delay"
    assert job.finished_at is None
    assert handler.abandoned == [], "a reschedule is not a retirement"
    assert enqueue(JobSpec.now(Reschedules.kind, "k")) is False, (
        "the rescheduled row still holds its identity"
    )


@pytest.mark.parametrize(
    "error",
    [
        ValueError("order 42 has no authorizations"),
        ConnectionError("order 42: connection reset by upstream"),
        TimeoutError("order 42: the upstream took too long to answer"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_an_exception_escaping_run_is_a_retry_with_its_traceback_in_last_error(
    registry, make_runner, configure, error
):
    """The operator needs the real failure, whatever its type, to tell a bug from a blip."""
    configure(max_attempts=5)

    class Raises(Recording):
        kind = "test.raises"

        def outcome(self, job: Job) -> Any:
            raise error

    handler = install(registry, Raises)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(Raises.kind, "k"))
    runner.drain()

    job = the_job(Raises.kind)
    assert job.state == State.QUEUED, "an exception is retried, not fatal"
    assert job.attempts == 1
    assert "Traceback" in job.last_error, "last_error holds the traceback"
    assert str(error) in job.last_error, "last_error holds the exception's message"
    assert handler.abandoned == []


def test_a_run_that_returns_something_other_than_an_outcome_is_a_retry_saying_so(
    registry, make_runner, configure
):
    configure(max_attempts=5)

    class ReturnsNonsense(Recording):
        kind = "test.nonsense"

        def outcome(self, job: Job) -> Any:
            return 42

    install(registry, ReturnsNonsense)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(ReturnsNonsense.kind, "k"))
    runner.drain()

    job = the_job(ReturnsNonsense.kind)
    assert job.state == State.QUEUED, "a wrong return value is retried, not taken as success"
    assert "returned 42" in job.last_error, "last_error says what run returned"
    assert "Done" in job.last_error, "and what it should have returned"


# -- budgets -------------------------------------------------------------------------


def test_an_overrunning_attempt_is_settled_as_a_timed_out_retry_and_its_late_result_discarded(
    registry, make_runner, configure, caplog
):
    """A thread cannot be cancelled, so the row is settled without it and the slot freed."""
    configure(max_attempts=5, max_concurrent=4)

    class Overruns(Blocks):
        kind = "test.overruns"

        def lease(self) -> timedelta:
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

        def lease(self) -> timedelta:
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


def test_the_lease_written_on_the_row_outlasts_the_handlers_own_budget(
    registry, make_runner, configure
):
    """The runner's own timeout must fire before another runner may take the row."""
    configure(lease_seconds=300)
    budget = timedelta(seconds=60)

    class Budgeted(Recording):
        kind = "test.budgeted"

        def __init__(self) -> None:
            super().__init__()
            self.leases: list[datetime | None] = []

        def lease(self) -> timedelta:
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

        def lease(self) -> timedelta:
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


# -- abandon -------------------------------------------------------------------------


def test_abandon_runs_inside_the_retirements_transaction_and_commits_with_it(registry, make_runner):
    """The subject hears the outcome exactly when the row settles: never one without the other."""

    class Notifies(Fails):
        kind = "test.notifies"

        def __init__(self) -> None:
            super().__init__()
            self.seen_inside: str | None = None
            self.seen_outside: tuple[str, int] | None = None

        def abandon(self, job: Job, reason: str) -> None:
            super().abandon(job, reason)
            Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())
            self.seen_inside = Job.objects.get(id=job.id).state
            seen: list[tuple[str, int]] = []

            def look() -> None:
                try:
                    seen.append((Job.objects.get(id=job.id).state, Abandonment.objects.count()))
                finally:
                    connections.close_all()

            other = threading.Thread(target=look)
            other.start()
            other.join(WAIT)
            self.seen_outside = seen[0] if seen else None

    handler = install(registry, Notifies)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(Notifies.kind, "k"))
    runner.drain()

    job = the_job(Notifies.kind)
    assert job.state == State.FAILED
    assert handler.seen_inside == State.FAILED, "abandon sees its own retirement"
    assert handler.seen_outside == (State.RUNNING, 0), (
        "until the transaction commits, neither the retirement nor abandon's write is visible"
    )
    assert list(Abandonment.objects.values_list("job_id", "reason")) == [(job.id, Fails.reason)], (
        "abandon's write committed with the retirement"
    )


def test_an_abandon_that_raises_is_logged_rolled_back_and_never_called_again(
    registry, make_runner, caplog
):
    class BrokenAbandon(Fails):
        kind = "test.broken_abandon"

        def abandon(self, job: Job, reason: str) -> None:
            super().abandon(job, reason)
            Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())
            raise RuntimeError("the notification service is down")

    handler = install(registry, BrokenAbandon)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(BrokenAbandon.kind, "k"))
    runner.drain()
    runner.drain()

    assert the_job(BrokenAbandon.kind).state == State.FAILED, "the retirement still commits"
    assert Abandonment.objects.count() == 0, "the failed abandon's write was rolled back"
    assert len(handler.abandoned) == 1, "abandon is never called again for a settled row"
    failures = events(caplog, "job_abandon_failed")
    assert len(failures) == 1, "the failure is logged once"
    assert "notification service is down" in failures[0].getMessage()
    assert failures[0].levelno == logging.ERROR


def test_a_claimed_row_that_has_used_up_its_attempts_is_retired_without_running(
    registry, make_runner, caplog
):
    """Its last attempt died with its runner; running it again would exceed the budget."""
    handler = install(registry, Succeeds)
    past = timezone.now() - timedelta(minutes=10)
    Job.objects.create(
        kind=Succeeds.kind,
        key="k",
        state=State.RUNNING,
        attempts=3,
        max_attempts=3,
        run_at=past,
        lease_expires_at=past + timedelta(minutes=5),
    )
    runner = make_runner(registry=registry)
    runner.drain()
    runner.drain()

    job = the_job(Succeeds.kind)
    assert handler.runs == [], "a row past its attempt budget is not run again"
    assert job.state == State.FAILED
    assert job.attempts == 4, "the claim that found it was counted"
    assert "attempts exhausted" in job.last_error
    assert len(handler.abandoned) == 1, "and it is abandoned exactly once"
    assert [r.getMessage() for r in events(caplog, "job_reclaimed")], "the takeover is logged"


def test_a_claimed_row_whose_deadline_has_passed_is_retired_without_running(registry, make_runner):
    handler = install(registry, Succeeds)
    now = timezone.now()
    spec = JobSpec(
        kind=Succeeds.kind,
        key="k",
        run_at=now - timedelta(minutes=2),
        deadline=now - timedelta(minutes=1),
    )
    assert enqueue(spec)
    runner = make_runner(registry=registry)
    runner.drain()

    job = the_job(Succeeds.kind)
    assert handler.runs == [], "work past its deadline is not started"
    assert job.state == State.FAILED
    assert "deadline" in job.last_error
    assert len(handler.abandoned) == 1, "the retirement is abandoned exactly once"


# -- recover -------------------------------------------------------------------------


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


# -- lanes ---------------------------------------------------------------------------


def test_lanes_split_max_concurrent_into_shares_that_add_up_to_it(make_runner, configure):
    configure(max_concurrent=8)
    shares = [make_runner(lane=lane, lanes=3) for lane in range(3)]
    config = shares[0].settings()

    assert [runner.slots.share(config) for runner in shares] == [3, 3, 2]

    configure(max_concurrent=1)
    pair = [make_runner(lane=lane, lanes=2) for lane in range(2)]
    assert [runner.slots.share(pair[0].settings()) for runner in pair] == [1, 0], (
        "a lane without a share claims nothing"
    )


def test_a_runner_refuses_a_lane_outside_its_number_of_lanes(make_runner):
    with pytest.raises(ValueError, match="lane 2 of 2"):
        make_runner(lane=2, lanes=2)


def test_two_lanes_together_never_run_more_than_max_concurrent(
    registry, make_runner, configure, blocked
):
    configure(max_concurrent=3)
    for n in range(10):
        assert enqueue(JobSpec.now(Blocks.kind, f"k{n}"))
    lanes = [make_runner(registry=registry, lane=lane, lanes=2) for lane in range(2)]

    assert [runner.run_pass() for runner in lanes] == [(2, 2), (1, 1)]
    assert blocked.wait_running(3)
    assert [runner.run_pass() for runner in lanes] == [(0, 0), (0, 0)], "every slot is busy"
    assert Job.objects.filter(state=State.RUNNING).count() == 3

    blocked.release.set()
    for runner in lanes:
        runner.drain()

    assert blocked.most_at_once == 3
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}


def test_a_lane_reports_itself_as_a_runner_naming_its_lane_and_its_share_of_the_slots(
    registry, make_runner, configure
):
    configure(max_concurrent=8)
    seen: list[tuple[int, int, int, str]] = []

    class LooksAtRunners(Succeeds):
        kind = "test.looks_at_runners"

        def run(self, job: Job) -> Done:
            seen.extend(
                (r.lane, r.lanes, r.max_concurrent, str(r)) for r in RunnerProcess.objects.all()
            )
            return Done()

    registry.register(LooksAtRunners)
    assert enqueue(JobSpec.now(LooksAtRunners.kind, "k"))
    make_runner(registry=registry, lane=1, lanes=2).drain()

    ((lane, lanes, slots, shown),) = seen
    assert (lane, lanes, slots) == (1, 2, 4), "lane 1 of 2 with half of max_concurrent"
    assert shown.endswith(" lane 1 of 2"), shown


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


# -- the loop ------------------------------------------------------------------------


def test_rows_of_a_kind_with_no_handler_wait_untouched_while_others_drain(registry, make_runner):
    install(registry, Succeeds)
    assert enqueue(JobSpec.now("test.nobody_handles_this", "k"))
    assert enqueue(JobSpec.now(Succeeds.kind, "k"))
    runner = make_runner(registry=registry)
    runner.drain()

    orphan = the_job("test.nobody_handles_this")
    assert orphan.state == State.QUEUED, "a row no handler answers for waits for one"
    assert orphan.attempts == 0, "and spends none of its attempts"
    assert the_job(Succeeds.kind).state == State.DONE


def test_no_more_than_max_concurrent_attempts_run_at_once(
    registry, make_runner, configure, blocked
):
    configure(max_concurrent=3)
    for n in range(10):
        assert enqueue(JobSpec.now(Blocks.kind, f"k{n}"))
    runner = make_runner(registry=registry)

    assert runner.run_pass() == (3, 3), "a claim takes only as many rows as free slots"
    assert blocked.wait_running(3), "three attempts are running"
    assert runner.run_pass() == (0, 0), "with every slot busy, nothing more is claimed"
    assert Job.objects.filter(state=State.RUNNING).count() == 3

    blocked.release.set()
    runner.drain()

    assert blocked.most_at_once == 3, "never more than max_concurrent at once"
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}
    assert len(blocked.runs) == 10


class Staggered(Recording):
    """Finishes after a delay set by its key's number, so attempts end one by one."""

    kind = "test.staggered"
    step = 0.02

    def run(self, job: Job) -> Any:
        threading.Event().wait(self.step * (int(job.key[1:]) % 4))
        return super().run(job)


def test_the_slots_short_attempts_free_are_claimed_together_by_the_next_pass(
    registry, make_runner, configure, monkeypatch
):
    """Attempts of one pass finish 20 ms apart; the next pass waits for them
    (here without a time limit) and settles and refills all four slots in one
    statement, instead of a pass per finished attempt."""
    monkeypatch.setattr(slots, "GATHER_SECONDS", WAIT)
    install(registry, Staggered)
    configure(max_concurrent=4)
    for n in range(8):
        assert enqueue(JobSpec.now(Staggered.kind, f"k{n}"))
    runner = make_runner(registry=registry)
    passes: list[tuple[int, int]] = []
    settle_and_claim = runner.store.settle_and_claim

    def recorded(done: Any, now: datetime, leases: Any, limit: int) -> Any:
        won, claims = settle_and_claim(done, now, leases, limit)
        passes.append((len(won), len(claims)))
        return won, claims

    monkeypatch.setattr(runner.store, "settle_and_claim", recorded)

    assert runner.run_pass() == (4, 4)
    assert runner.run_pass() == (4, 4)

    assert passes == [(0, 4), (4, 4)], "four settled and four claimed, in the second pass"


def test_a_pass_waits_for_a_long_attempt_once_and_later_passes_not_at_all(
    registry, make_runner, configure, blocked, monkeypatch
):
    monkeypatch.setattr(slots, "GATHER_SECONDS", 0.01)
    configure(max_concurrent=2)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    runner = make_runner(registry=registry)
    waits: list[float | None] = []
    doorbell_wait = runner.doorbell.wait

    def counted(timeout: float | None = None) -> bool:
        waits.append(timeout)
        return bool(doorbell_wait(timeout))

    monkeypatch.setattr(runner.doorbell, "wait", counted)

    assert runner.run_pass() == (1, 2)
    assert blocked.wait_running(1)
    runner.run_pass()
    assert len(waits) == 1, "the pass after the claim waited for the attempt, once"
    runner.run_pass()
    runner.run_pass()

    assert len(waits) == 1, "an attempt still running is not waited for again"


def test_a_pass_of_short_attempts_wakes_the_loop_once_when_the_last_of_them_finishes(
    registry, make_runner, configure, monkeypatch
):
    """Each wake-up of the loop costs more CPU than a no-op job, so the
    attempts one pass started ring the doorbell once between them, not once each."""
    monkeypatch.setattr(slots, "GATHER_SECONDS", WAIT)
    install(registry, Succeeds)
    configure(max_concurrent=4)
    for n in range(4):
        assert enqueue(JobSpec.now(Succeeds.kind, f"k{n}"))
    runner = make_runner(registry=registry)
    rings: list[str] = []
    ring = runner.doorbell.set

    def counted() -> None:
        rings.append(threading.current_thread().name)
        ring()

    monkeypatch.setattr(runner.doorbell, "set", counted)

    assert runner.run_pass() == (4, 4)
    assert wait_until(
        lambda: runner.completer.waiting() == 4 and runner.pool.idle() == runner.pool.size
    )
    assert runner.run_pass() == (0, 4), "the second pass settles the four"

    from_workers = [name for name in rings if name.startswith("jobs-worker")]
    assert len(from_workers) == 1, f"one ring, by the last to finish: {rings}"
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}


def test_an_idle_runner_settles_a_finished_attempt_while_its_pass_mate_still_runs(
    registry, make_runner, configure, blocked
):
    """Once the loop goes idle (its pass claimed fewer rows than it had slots),
    every finish rings again: a short attempt's row is settled at once, not when
    the long one it was claimed with ends, nor at the next poll."""
    install(registry, Succeeds)
    configure(max_concurrent=4, poll_interval_ms=60_000)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    assert enqueue(JobSpec.now(Succeeds.kind, "short"))
    runner = make_runner(registry=registry)

    loop = start_loop(runner)
    try:
        assert blocked.started.wait(WAIT), "the long attempt started"
        assert wait_until(lambda: the_job(Succeeds.kind, "short").state == State.DONE, WAIT), (
            "the short attempt was settled while the long one still ran"
        )
        assert the_job(Blocks.kind, "long").state == State.RUNNING
    finally:
        blocked.release.set()
        runner.stop()
        loop.join(WAIT)


def test_each_transition_is_one_structured_log_line_on_the_jobs_logger(
    registry, make_runner, configure, caplog
):
    caplog.set_level(logging.DEBUG, logger="jobs")
    configure(max_attempts=2)
    install(registry, Succeeds)
    install(registry, Retries)
    install(registry, Fails)
    for kind in (Succeeds.kind, Retries.kind, Fails.kind):
        assert enqueue(JobSpec.now(kind, "k"))
    runner = make_runner(registry=registry)
    runner.drain()

    def keyed(name: str) -> list[tuple[str, str]]:
        found = []
        for record in events(caplog, name):
            fields = getattr(record, "fields", {})
            found.append((fields["kind"], fields["key"]))
        return found

    assert sorted(keyed("job_claimed")) == sorted(
        [(Succeeds.kind, "k"), (Retries.kind, "k"), (Fails.kind, "k")]
    ), "one job_claimed per claim"
    assert keyed("job_done") == [(Succeeds.kind, "k")]
    assert keyed("job_retry") == [(Retries.kind, "k")]
    assert keyed("job_failed") == [(Fails.kind, "k")]
    assert keyed("job_abandoned") == [(Fails.kind, "k")]
    assert keyed("job_reclaimed") == []
    retry = events(caplog, "job_retry")[0]
    next_run_at = the_job(Retries.kind).run_at
    assert getattr(retry, "fields", {})["next_run_at"] == next_run_at.isoformat(), (
        "job_retry says when the next attempt runs"
    )
    assert "next_run_at=" in retry.getMessage(), "and says it in the message people read"
    for record in events(caplog, "job_done"):
        assert "outcome=done" in record.getMessage(), "every event carries its outcome"


def test_taking_over_an_expired_lease_is_logged_as_job_reclaimed(registry, make_runner, caplog):
    install(registry, Succeeds)
    past = timezone.now() - timedelta(minutes=10)
    Job.objects.create(
        kind=Succeeds.kind,
        key="k",
        state=State.RUNNING,
        attempts=1,
        max_attempts=5,
        run_at=past,
        lease_expires_at=past + timedelta(minutes=5),
    )
    runner = make_runner(registry=registry)
    runner.drain()

    reclaimed = events(caplog, "job_reclaimed")
    assert len(reclaimed) == 1, "the takeover of a vanished runner's row is logged once"
    assert reclaimed[0].levelno == logging.WARNING, "a vanished runner is worth a warning"
    assert events(caplog, "job_claimed") == [], "and not also as an ordinary claim"
    assert the_job(Succeeds.kind).state == State.DONE


def test_stop_returns_from_run_while_an_attempt_runs_and_finish_waits_for_it_to_settle(
    registry, make_runner, blocked
):
    assert enqueue(JobSpec.now(Blocks.kind, "k"))
    runner = make_runner(registry=registry)

    loop = start_loop(runner)
    try:
        assert blocked.started.wait(WAIT), "the attempt started"
        runner.stop()
        loop.join(WAIT)
        assert not loop.is_alive(), "run() returned although an attempt is still running"
        assert len(runner.in_flight()) == 1
        assert runner.finish(0) is False, "with no grace, the running attempt is left"
        assert the_job(Blocks.kind).state == State.RUNNING

        threading.Timer(0.2, blocked.release.set).start()
        assert runner.finish(WAIT) is True, "finish waited for the attempt"
    finally:
        blocked.release.set()
        loop.join(WAIT)

    assert the_job(Blocks.kind).state == State.DONE, "the attempt settled within the grace"
    assert runner.in_flight() == []


def test_a_live_row_is_never_claimed_twice_by_two_runners_draining_together(
    registry, make_runner, configure
):
    configure(max_concurrent=4)

    class Counts(Recording):
        kind = "test.counts"

        def __init__(self) -> None:
            super().__init__()
            self._lock = threading.Lock()

        def run(self, job: Job) -> Any:
            with self._lock:
                self.runs.append((job.key, job.attempts))
            return Done()

    handler = install(registry, Counts)
    for n in range(40):
        assert enqueue(JobSpec.now(Counts.kind, f"k{n}"))
    runners = [make_runner(registry=registry) for _ in range(2)]
    errors: list[BaseException] = []

    def drain(runner: Any) -> None:
        try:
            runner.drain()
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=drain, args=(r,)) for r in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert not errors, errors
    keys = [key for key, _ in handler.runs]
    assert sorted(keys) == sorted(f"k{n}" for n in range(40)), "every job ran exactly once"
    assert not Job.objects.filter(state__in=LIVE_STATES).exists()


def test_a_drain_opens_a_connection_per_thread_not_per_job_whatever_conn_max_age_says(
    registry, make_runner, configure
):
    """Django closes a connection older than `CONN_MAX_AGE` (0: every one) when a
    request ends; a runner never ends a request, so its loop and each worker
    keep theirs for as long as they live, and a handler's queries reuse its
    worker's. Counted with Django's own `connection_created` signal."""
    from django.db import connection
    from django.db.backends.signals import connection_created

    assert connection.settings_dict["CONN_MAX_AGE"] == 0, "Django's default: close per request"
    configure(max_concurrent=4)

    class Querying(Recording):
        kind = "test.querying"

        def run(self, job: Job) -> Any:
            Job.objects.filter(id=job.id).exists()  # a handler's own ORM query
            return super().run(job)

    handler = install(registry, Querying)
    for n in range(60):
        assert enqueue(JobSpec.now(Querying.kind, f"k{n}"))
    opened: collections.Counter[str] = collections.Counter()  # by thread

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened[threading.current_thread().name] += 1

    connection_created.connect(count)
    try:
        runner = make_runner(registry=registry)
        runner.drain()
    finally:
        connection_created.disconnect(count)

    assert len(handler.runs) == 60, "every job ran"
    assert Job.objects.filter(kind=Querying.kind, state=State.DONE).count() == 60
    # Django's MySQL backend also opens one short-lived connection per
    # connection object, the first time it reads the server's version.
    per_thread = 2 if connection.vendor == "mysql" else 1
    assert max(opened.values()) <= per_thread, f"connections opened, by thread: {dict(opened)}"
    assert len(opened) <= runner.pool.size + 1, (
        f"threads that opened one: {dict(opened)}; the loop and {runner.pool.size} workers ran"
    )
