"""Abandon: called exactly once, after the retirement has committed, in a transaction of
its own, including for rows retired without running (attempts used up, deadline passed),
and for retirements whose process died before the call (a debt another runner pays)."""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from jobs import JobSpec, enqueue, retirement
from jobs.models import Job, State
from tests.factories import make_job
from tests.integration.runner.support import WAIT, Fails, Succeeds, events, install, the_job
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db(transaction=True)


def test_abandon_runs_once_the_retirement_has_committed_and_its_writes_commit_together(
    registry, make_runner
):
    """The retirement no longer waits for abandon: another session sees the job retired
    and its debt claimed while abandon runs, and abandon's own write only once it returns."""

    class Notifies(Fails):
        kind = "test.notifies"

        def __init__(self) -> None:
            super().__init__()
            self.seen_outside: tuple[str, bool, int] | None = None

        def abandon(self, job: Job, reason: str) -> None:
            super().abandon(job, reason)
            Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())
            seen: list[tuple[str, bool, int]] = []

            def look() -> None:
                try:
                    row = Job.objects.get(id=job.id)
                    seen.append(
                        (row.state, row.abandon_owed_at is None, Abandonment.objects.count())
                    )
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
    assert handler.seen_outside == (State.FAILED, True, 0), (
        "while abandon runs, the retirement and the claim of its call are committed, "
        "and abandon's own write is not"
    )
    assert list(Abandonment.objects.values_list("job_id", "reason")) == [(job.id, Fails.reason)], (
        "abandon's write committed when it returned"
    )
    assert job.abandon_owed_at is None, "nothing is owed any more"


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


def test_a_retirement_whose_process_died_before_the_call_is_abandoned_once_by_another_runner(
    registry, make_runner, caplog
):
    """The crash between the two steps leaves the mark: the next runner with a handler for
    the kind makes the call at its first pass, once, and no later pass makes it again."""
    handler = install(registry, Fails)
    past = timezone.now() - retirement.GRACE - timedelta(seconds=1)
    left = make_job(
        "k", state=State.FAILED, kind=Fails.kind, last_error="refused", abandon_owed_at=past
    )
    make_job("other", state=State.FAILED, kind="test.elsewhere", abandon_owed_at=past)
    runner = make_runner(registry=registry)
    runner.drain()
    runner.close()  # waits for the payment its first pass started

    assert handler.abandoned == [("k", "refused")], "abandon is called once, with the row's reason"
    assert Job.objects.get(id=left.id).abandon_owed_at is None, "the debt is paid"
    owed = Job.objects.get(key="other").abandon_owed_at
    assert owed == past, "a kind this runner has no handler for is left to one that has"
    [started] = events(caplog, "job_abandon_started")
    assert "owed_since=" in started.getMessage(), "a late payment says since when it was owed"

    again = make_runner(registry=registry)
    again.drain()
    again.close()
    assert handler.abandoned == [("k", "refused")], "a paid debt is never paid again"


def test_a_debt_younger_than_the_grace_is_left_to_the_process_that_retired_the_job(
    registry, make_runner
):
    handler = install(registry, Fails)
    make_job("k", state=State.FAILED, kind=Fails.kind, abandon_owed_at=timezone.now())
    runner = make_runner(registry=registry)
    runner.drain()
    runner.close()
    assert handler.abandoned == [], "its own process claims it within moments of its commit"
    assert Job.objects.get(key="k").abandon_owed_at is not None


def test_an_abandon_that_raises_leaves_the_debt_paid_and_is_never_called_again(
    registry, make_runner, caplog
):
    """At most once: a failed call is logged, not retried, by this runner or any other."""

    class Raises(Fails):
        kind = "test.raises"

        def abandon(self, job: Job, reason: str) -> None:
            super().abandon(job, reason)
            raise RuntimeError("the notification service is down")

    handler = install(registry, Raises)
    assert enqueue(JobSpec.now(Raises.kind, "k"))
    make_runner(registry=registry).drain()
    assert the_job(Raises.kind).abandon_owed_at is None, "the claim stands though the call failed"
    later = make_runner(registry=registry, clock=lambda: timezone.now() + timedelta(hours=1))
    later.drain()
    later.close()
    assert len(handler.abandoned) == 1
    assert len(events(caplog, "job_abandon_failed")) == 1
