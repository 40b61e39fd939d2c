"""Values past what a date or a lease can hold, and an error nobody foresaw: the runner
retires the job saying why, or runs it as usual, and keeps serving."""

from __future__ import annotations

from datetime import timedelta
from threading import Event
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from jobs import JobSpec, Reschedule, Retry, enqueue
from jobs.models import Job, JobsConfig, State
from jobs.runner.attempt import Attempt
from jobs.runner.completer import Completer
from jobs.runner.slots import Slots
from jobs.store import for_database
from jobs.store.admission import Admission
from tests.helpers import running, wait_until
from tests.integration.bad_rows.support import (
    EARLIEST,
    KIND,
    LATEST,
    LEASE,
    Recording,
    _Sink,
    queue,
    reloaded,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_due_at_the_end_of_year_9999_waits_and_the_admin_and_cli_still_show_it(
    handler, registry, make_runner, admin_client
):
    assert enqueue(JobSpec(KIND, "far", run_at=LATEST))
    job = Job.objects.get(key="far")
    assert job.run_at == LATEST, "the latest instant a datetime holds round-trips"

    make_runner(registry=registry).drain()

    assert (reloaded(job).state, reloaded(job).attempts) == (State.QUEUED, 0), "it waits"
    assert admin_client.get(reverse("admin:jobs_job_changelist")).status_code == 200, (
        "the admin's list renders it"
    )
    assert admin_client.get(reverse("admin:jobs_job_change", args=[job.id])).status_code == 200, (
        "and its page"
    )
    assert admin_client.get(reverse("admin:jobs_dashboard")).status_code == 200, "and the dashboard"
    call_command("jobs", "list", stdout=_Sink())
    call_command("jobs", "show", str(job.id), stdout=_Sink())
    call_command("jobs", "stats", stdout=_Sink())


def test_a_job_due_in_year_1_runs_at_once(handler, registry, make_runner):
    assert enqueue(JobSpec(KIND, "old", run_at=EARLIEST))
    make_runner(registry=registry).drain()
    assert Job.objects.get(key="old").state == State.DONE, "a run_at long past is simply due"


def test_a_job_whose_deadline_passed_in_year_1_is_retired_without_running(
    handler, registry, make_runner
):
    assert enqueue(JobSpec(KIND, "old", run_at=EARLIEST, deadline=EARLIEST))
    make_runner(registry=registry).drain()
    job = Job.objects.get(key="old")
    assert job.state == State.FAILED, "a deadline long past retires the job"
    assert "deadline 0001-01-01T00:00:00+00:00 passed" in job.last_error, job.last_error
    assert handler.runs == [], "without running it"
    assert len(handler.abandoned) == 1, "and abandons it once"


def test_a_job_with_a_deadline_in_year_9999_retries_as_usual(
    handler, registry, make_runner, configure
):
    configure(max_attempts=2, retry_base_seconds=0, retry_max_seconds=0)
    handler.outcome = lambda job: Retry("the upstream answered 503")
    assert enqueue(JobSpec(KIND, "k", deadline=LATEST))
    runner = make_runner(registry=registry)
    runner.drain()
    runner.drain()
    job = Job.objects.get(key="k")
    assert job.state == State.FAILED, "it retried until its attempts ran out"
    assert job.attempts == 2, "every attempt ran"
    assert job.last_error.startswith("gave up after 2 of 2 attempts"), job.last_error


def test_a_reschedule_past_year_9999_retires_the_job_saying_why(handler, registry, make_runner):
    handler.outcome = lambda job: Reschedule(timedelta.max)
    queue("k")
    make_runner(registry=registry).drain()
    job = Job.objects.get(key="k")
    assert job.state == State.FAILED, "a next run no date can hold retires the job"
    assert "puts the next run past the latest instant a date can hold" in job.last_error, (
        job.last_error
    )
    assert len(handler.abandoned) == 1, "and abandons it once"


def test_a_reschedule_whose_delay_is_not_a_timedelta_fails_the_job_saying_so(
    handler, registry, make_runner
):
    """The same run would return the same again: retrying it only repeats its work."""
    handler.outcome = lambda job: Reschedule(60)  # type: ignore[arg-type]
    queue("k")
    make_runner(registry=registry).drain()
    job = Job.objects.get(key="k")
    assert job.state == State.FAILED, "the bad outcome is the job's own Failed"
    assert "whose delay is not a timedelta" in job.last_error, job.last_error
    assert len(handler.abandoned) == 1, "and abandons it once"


def test_a_retry_whose_backoff_would_pass_year_9999_retires_the_job_saying_why(handler, configure):
    """Adding the backoff to a clock near the end of time overflows; the settle must not."""
    configure(retry_base_seconds=3600, retry_max_seconds=3600)
    queue("k")
    store = for_database()
    claim = store.claim(Admission(timezone.now(), {KIND: LEASE}, 1))[0]
    attempt = Attempt(claim, handler, JobsConfig.load().as_settings(), LEASE, timezone.now())
    near_the_end = LATEST - timedelta(minutes=1)
    completer = Completer(store, Slots(Event()), clock=lambda: near_the_end)
    completer.settle(attempt, Retry("503"), near_the_end)

    job = Job.objects.get(key="k")
    assert job.state == State.FAILED, "the job is retired rather than the settle crashing"
    assert job.last_error.startswith(
        "the next attempt would fall past the latest instant a date can hold"
    ), job.last_error
    assert job.last_error.endswith(": 503"), "the attempt's own reason is kept"
    assert len(handler.abandoned) == 1, "abandon is called once"


def test_an_unforeseen_error_in_a_pass_is_logged_and_the_runner_keeps_serving(
    handler, registry, make_runner, caplog
):
    """Whatever a row or a bug throws at a pass, `runjobs` must not exit over it."""
    runner = make_runner(registry=registry)
    real = runner.store.settle_and_claim
    calls = []

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("something nobody foresaw")
        return real(*args, **kwargs)

    runner.store.settle_and_claim = fails_once
    queue("k")
    with running(runner):
        assert wait_until(lambda: Job.objects.get(key="k").state == State.DONE), (
            "the runner went on to claim and run the job after the failed pass"
        )
    failures = [r for r in caplog.records if getattr(r, "event", None) == "runner_pass_failed"]
    assert len(failures) == 1, "the failed pass is logged once"
    assert "something nobody foresaw" in failures[0].getMessage(), "with its error"


@pytest.mark.parametrize(
    "lease",
    [
        pytest.param(timedelta.max, id="past-year-9999"),
        pytest.param(timedelta(seconds=-1), id="negative"),
        pytest.param(300, id="not-a-timedelta"),
    ],
)
def test_a_handler_whose_lease_is_absurd_runs_under_the_configured_lease(
    registry, make_runner, caplog, lease
):
    """One handler's bad `lease()` must not fail the claim for every kind."""

    class AbsurdLease(Recording):
        kind = "test.absurd_lease"

        def budget(self) -> Any:
            return lease

    registry.register(AbsurdLease)
    registry.register(Recording)
    assert enqueue(JobSpec.now(AbsurdLease.kind, "k"))
    queue("other")
    make_runner(registry=registry).drain()

    assert Job.objects.get(kind=AbsurdLease.kind).state == State.DONE, (
        "its job runs under the configured lease"
    )
    assert Job.objects.get(key="other").state == State.DONE, "and so do other kinds' jobs"
    invalid = [r for r in caplog.records if getattr(r, "event", None) == "handler_lease_invalid"]
    assert invalid, "the bad lease is logged"
