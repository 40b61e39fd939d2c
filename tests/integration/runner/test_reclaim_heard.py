"""A reclaimed attempt's entry says when its vanished runner last beat
(`Entry.heard_at`), read from the runner's row at the reclaim: the attempt
ran until some time after that, not until it was found. And a runner that is
still there beats, even while it waits out its grace."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import JobSpec, enqueue
from jobs.history import Outcome
from jobs.models import Job, RunnerProcess, State
from tests.integration.runner.support import WAIT, Succeeds, install, the_job

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


def test_a_runner_waiting_out_its_grace_still_beats_and_is_not_shown_gone(
    registry, make_runner, blocked
):
    """A stopping runner still runs its attempts while it finishes; with gone
    at two missed beats (10 s), a grace longer than that must not show it
    gone, nor its jobs stuck on "runner gone"."""
    assert enqueue(JobSpec.now(blocked.kind, "k"))
    now = [timezone.now() + timedelta(seconds=1)]
    runner = make_runner(registry=registry, clock=lambda: now[0])
    runner.presence.register([blocked.kind], 4)
    runner.run_pass()
    assert blocked.started.wait(WAIT), "the attempt runs"
    runner.stop()
    now[0] += RunnerProcess.STALE_AFTER + timedelta(seconds=1)

    assert not runner.finish(0.2), "the attempt still runs when the grace is over"

    row = RunnerProcess.objects.get(pk=runner.presence.row.pk)
    assert row.heartbeat_at == now[0], "it beat while it waited"
    assert not row.is_gone(now[0])
    blocked.release.set()
    assert runner.finish(WAIT)
