"""How each outcome a handler returns settles its row: Done, Retry, Failed, Reschedule,
an exception, and anything else."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from freezegun import freeze_time

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from tests.integration.runner.support import (
    T0,
    Fails,
    Recording,
    Reschedules,
    Retries,
    Succeeds,
    install,
    the_job,
)

pytestmark = pytest.mark.django_db(transaction=True)


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


@pytest.mark.parametrize(
    "escape",
    [SystemExit(1), KeyboardInterrupt(), GeneratorExit()],
    ids=lambda error: type(error).__name__,
)
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_base_exception_escaping_run_is_a_retry_with_its_traceback_and_frees_its_slot(
    registry, make_runner, configure, escape, flavour
):
    """`sys.exit()` in a handler, or a library's `exit()`, ends that attempt only:
    it is settled as any failure, where it had left the row running until its
    lease expired. `drain` waits for every slot, so it returns only if the slot
    was given back."""
    configure(max_attempts=5, max_concurrent=1)

    class Escapes(Recording):
        kind = "test.escapes"

        def outcome(self, job: Job) -> Any:
            raise escape

    class EscapesAsync(Escapes):
        async def run(self, job: Job) -> Any:
            return super().run(job)

    handler = install(registry, Escapes if flavour == "sync" else EscapesAsync)
    install(registry, Succeeds)
    runner = make_runner(registry=registry)
    assert enqueue(JobSpec.now(Escapes.kind, "k"))
    runner.drain(timeout=10)

    job = the_job(Escapes.kind)
    assert job.state == State.QUEUED, "the attempt was settled as a retry"
    assert job.attempts == 1
    assert "Traceback" in job.last_error, "last_error holds the traceback"
    assert type(escape).__name__ in job.last_error, "last_error names what was raised"
    assert handler.abandoned == []

    assert enqueue(JobSpec.now(Succeeds.kind, "next"))
    runner.drain(timeout=10)
    assert the_job(Succeeds.kind, "next").state == State.DONE, "its one slot took the next job"
