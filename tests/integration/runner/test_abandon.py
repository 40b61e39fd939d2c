"""Abandon: called exactly once, inside the retirement's transaction, including for rows
retired without running (attempts used up, deadline passed)."""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from tests.integration.runner.support import WAIT, Fails, Succeeds, events, install, the_job
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db(transaction=True)


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
