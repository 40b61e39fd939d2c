"""A reclaimed attempt's entry says when its vanished runner last beat
(`Entry.heard_at`), read from the runner's row at the reclaim: the attempt
ran until some time after that, not until it was found."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.history import Outcome
from jobs.models import Job, RunnerProcess, State
from tests.integration.runner.support import Succeeds, install, the_job

pytestmark = pytest.mark.django_db(transaction=True)


def vanished(runner: str) -> None:
    """A row left running by `runner`, its lease run out a minute ago (its row,
    if any, is not yet forgotten: `RunnerProcess.FORGET_AFTER`)."""
    past = timezone.now() - timedelta(minutes=3)
    Job.objects.create(
        kind=Succeeds.kind,
        key="k",
        state=State.RUNNING,
        attempts=1,
        max_attempts=5,
        run_at=past,
        started_at=past,
        lease_expires_at=past + timedelta(minutes=2),
        claimed_by=runner,
    )


def test_a_reclaim_notes_when_the_vanished_runner_last_beat(registry, make_runner):
    install(registry, Succeeds)
    heard = timezone.now() - timedelta(minutes=2, seconds=30, microseconds=250_000)
    RunnerProcess.objects.create(
        hostname="gone-host",
        pid=77,
        version="t",
        started_at=heard - timedelta(hours=1),
        heartbeat_at=heard,
        max_concurrent=8,
        running=1,
        kinds=[Succeeds.kind],
    )
    vanished("gone-host:77")
    make_runner(registry=registry).drain()

    [entry] = the_job(Succeeds.kind).attempt_history
    assert entry.outcome == Outcome.RECLAIMED
    assert entry.heard_at == heard, "the runner's last heartbeat, to the microsecond"


def test_a_reclaim_whose_runner_row_is_forgotten_notes_no_heartbeat(registry, make_runner):
    install(registry, Succeeds)
    vanished("forgotten-host:78")
    make_runner(registry=registry).drain()

    [entry] = the_job(Succeeds.kind).attempt_history
    assert (entry.outcome, entry.heard_at) == (Outcome.RECLAIMED, None), "not known, not made up"
