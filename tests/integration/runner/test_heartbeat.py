"""The runner's heartbeat (`jobs.runner.heartbeat`): leases renewed on a thread
of their own while attempts run, fenced on each attempt, never waiting on a
locked row; an attempt whose lease ran out given up; the clock measured."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone
from freezegun import freeze_time

from jobs import JobSpec, clock, enqueue
from jobs.models import Job, MinuteCount, RunnerProcess, State
from jobs.registry import Registry
from jobs.runner.presence import Presence
from jobs.store import for_database
from jobs.store.admission import Admission
from tests.helpers import running, wait_until
from tests.integration.runner.support import T0, Blocks

pytestmark = pytest.mark.django_db(transaction=True)


def lease_of(key: str) -> Any:
    return Job.objects.get(key=key).lease_expires_at


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    """The fields of each event `name` logged."""
    return [
        getattr(record, "fields", {})
        for record in caplog.records
        if getattr(record, "event", "") == name
    ]


def test_a_running_attempts_lease_is_renewed_every_heartbeat_and_never_runs_out(
    blocked: Blocks, registry: Registry, make_runner, configure
):
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert blocked.wait_running(1)
        first = lease_of("long")
        assert first - timezone.now() <= timedelta(seconds=3), "three heartbeats at claim"
        seen = [first]
        for _ in range(3):
            assert wait_until(lambda: lease_of("long") > seen[-1], 5), "renewed"
            seen.append(lease_of("long"))
            assert seen[-1] > timezone.now(), "the lease never runs out while it runs"
        blocked.release.set()
        assert wait_until(lambda: Job.objects.get(key="long").state == State.DONE, 5), (
            "the settle, fenced on the renewed lease, still wins"
        )
    assert len(blocked.runs) == 1


def test_leases_are_renewed_while_the_loop_is_blocked(
    blocked: Blocks, registry: Registry, make_runner, configure, monkeypatch
):
    """The renewals are the heartbeat thread's: a loop stuck in a pass (a
    settle waiting on a lock, a slow statement) no longer holds them up."""
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert blocked.wait_running(1)
        stuck, unstick = threading.Event(), threading.Event()
        real_refresh = runner._refresh

        def refresh_stuck(**kwargs: Any) -> Any:
            stuck.set()
            unstick.wait(30)
            return real_refresh(**kwargs)

        monkeypatch.setattr(runner, "_refresh", refresh_stuck)
        try:
            assert stuck.wait(5), "the loop is stuck"
            first = lease_of("long")
            assert wait_until(lambda: lease_of("long") > first, 5), "renewed all the same"
        finally:
            unstick.set()
        blocked.release.set()


def test_a_renewal_never_revives_a_row_another_runner_took_or_an_operator_cancelled_and_gives_it_up(
    blocked: Blocks, registry: Registry, make_runner, configure, caplog
):
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "taken"))
    assert enqueue(JobSpec.now(Blocks.kind, "cancelled"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert blocked.wait_running(2)
        taken_until = timezone.now() + timedelta(hours=1)
        Job.objects.filter(key="taken").update(attempts=2, lease_expires_at=taken_until)
        Job.objects.filter(key="cancelled").update(state=State.CANCELLED, lease_expires_at=None)
        assert wait_until(lambda: all(a.lease_lost for a in runner.in_flight()), 5), (
            "the next renewal finds both rows are not theirs any more, and gives them up"
        )
        taken, cancelled = Job.objects.get(key="taken"), Job.objects.get(key="cancelled")
        assert taken.lease_expires_at == taken_until, "the other runner's lease is untouched"
        assert (cancelled.state, cancelled.lease_expires_at) == (State.CANCELLED, None)
        blocked.release.set()
    lost = {fields["key"] for fields in events(caplog, "job_lease_lost")}
    assert lost == {"taken", "cancelled"}, "each is logged as lost, once"
    assert len(events(caplog, "job_lease_lost")) == 2


def test_an_attempt_whose_lease_ran_out_before_a_renewal_got_through_is_given_up_and_never_renewed(
    blocked: Blocks, registry: Registry, make_runner, configure, caplog
):
    configure(heartbeat_seconds=10)
    assert enqueue(JobSpec.now(Blocks.kind, "late"))
    moment = [timezone.now()]
    runner = make_runner(registry=registry, clock=lambda: moment[0])
    runner.run_pass()
    assert blocked.wait_running(1)
    [attempt] = runner.in_flight()
    lease = attempt.job.lease_expires_at
    moment[0] = lease + timedelta(seconds=1)  # the renewals due meanwhile never got through

    runner.heartbeat.renew(moment[0], timedelta(seconds=10))
    runner.heartbeat.renew(moment[0], timedelta(seconds=10))

    assert attempt.lease_lost
    assert lease_of("late") == lease, "not renewed: another runner may be running it by now"
    [lost] = events(caplog, "job_lease_lost")
    assert (lost["key"], "ran out" in lost["reason"]) == ("late", True)
    [taken] = for_database().claim(Admission(moment[0], {Blocks.kind: timedelta(minutes=5)}, 1))
    assert taken.job.attempts == 2, "another runner took the row"
    blocked.release.set()
    assert wait_until(lambda: runner.completer.waiting() == 1, 5)
    runner.run_pass()
    job = Job.objects.get(key="late")
    assert (job.state, job.attempts) == (State.RUNNING, 2), "the late settle was refused"
    assert [fields["key"] for fields in events(caplog, "job_settle_lost")] == ["late"], (
        "and said so"
    )


@contextmanager
def row_locked_elsewhere(key: str) -> Iterator[None]:
    """Hold `SELECT ... FOR UPDATE` on the row of `key` in another session."""
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Job.objects.select_for_update().filter(key=key))
                holding.set()
                done.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(30), "the other session holds the row"
        yield
    finally:
        done.set()
        thread.join(30)


@pytest.mark.concurrent_db
def test_a_row_locked_by_another_session_is_skipped_and_logged_while_the_others_are_renewed(
    blocked: Blocks, registry: Registry, make_runner, configure, caplog
):
    configure(heartbeat_seconds=10)
    for key in ("a", "locked", "c"):
        assert enqueue(JobSpec.now(Blocks.kind, key))
    runner = make_runner(registry=registry)
    runner.run_pass()
    assert blocked.wait_running(3)
    before = {key: lease_of(key) for key in ("a", "locked", "c")}
    now = timezone.now()

    with row_locked_elsewhere("locked"):
        runner.heartbeat.renew(now, timedelta(seconds=10))

    after = {key: lease_of(key) for key in ("a", "locked", "c")}
    assert after["a"] > before["a"], "the others are renewed"
    assert after["c"] > before["c"]
    assert after["locked"] == before["locked"], "the locked row is left for the next beat"
    [skipped] = events(caplog, "job_renewal_skipped")
    assert skipped["key"] == "locked"
    assert not any(attempt.lease_lost for attempt in runner.in_flight()), "nothing given up"
    runner.heartbeat.renew(timezone.now(), timedelta(seconds=10))
    assert lease_of("locked") > before["locked"], "the next beat renews it"
    blocked.release.set()
    assert wait_until(lambda: runner.completer.waiting() == 3, 5)
    runner.run_pass()
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}, (
        "every settle, fenced on the renewed leases, wins"
    )


@pytest.fixture
def database_clock() -> Iterator[clock.DatabaseClock]:
    """This process's clock of the default database, unmeasured before and after."""
    found = clock.of()
    found.correction, found.last = timedelta(0), None
    yield found
    found.correction, found.last = timedelta(0), None


def an_hour_ahead() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def test_a_runner_measures_the_databases_clock_at_start_and_tells_time_by_it(
    registry: Registry, make_runner, database_clock, monkeypatch
):
    runner = make_runner(registry=registry)
    monkeypatch.setattr(runner.store, "database_now", an_hour_ahead)
    runner.drain()
    assert database_clock.last is not None, "measured at start"
    assert runner.clock() - timezone.now() > timedelta(minutes=59), "and corrected by it"
    offset = RunnerProcess.objects.get().clock_offset_ms
    assert offset is not None
    assert offset > 3_590_000, "shown with its presence"


def test_a_runner_never_measures_the_clock_while_freezegun_has_frozen_time(
    registry: Registry, make_runner, database_clock, monkeypatch
):
    """A frozen clock against the database's real one would be a skew of years."""
    with freeze_time(T0):
        runner = make_runner(registry=registry)
        monkeypatch.setattr(runner.store, "database_now", an_hour_ahead)
        runner.drain()
        assert runner.clock() == T0, "the runner's time is the frozen time"
    assert database_clock.last is None, "nothing was measured"
    assert database_clock.correction == timedelta(0)


def test_a_runner_given_a_clock_of_its_own_never_measures_the_databases(
    registry: Registry, make_runner, database_clock, monkeypatch
):
    runner = make_runner(registry=registry, clock=lambda: T0)
    monkeypatch.setattr(runner.store, "database_now", an_hour_ahead)
    runner.drain()
    assert database_clock.last is None, "nothing was measured"
    assert runner.clock() == T0


def test_a_runner_whose_clock_went_back_reports_in_at_once_rather_than_when_its_time_catches_up():
    """A runner a minute ahead registers its presence before its first reading
    of the database's clock, a minute early: corrected, its next beat must
    not wait a minute (it would be shown as gone)."""
    moment = [T0 + timedelta(minutes=1)]
    presence = Presence("default", lambda: moment[0])
    presence.register(["a"], 4)
    moment[0] = T0 + timedelta(seconds=1)

    presence.beat(running=0, max_concurrent=4)

    assert RunnerProcess.objects.get().heartbeat_at == T0 + timedelta(seconds=1)


def test_a_heartbeat_that_raises_is_logged_and_the_next_one_still_renews(
    blocked: Blocks, registry: Registry, make_runner, configure, caplog, monkeypatch
):
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    runner = make_runner(registry=registry)
    real_renew, calls = runner.heartbeat.renew, []

    def renew_once_broken(now: Any, heartbeat: Any) -> None:
        calls.append(now)
        if len(calls) == 1:
            raise RuntimeError("a bug in one beat")
        real_renew(now, heartbeat)

    monkeypatch.setattr(runner.heartbeat, "renew", renew_once_broken)
    with running(runner):
        assert blocked.wait_running(1)
        first = lease_of("long")
        assert wait_until(lambda: lease_of("long") > first, 5), "a later beat renews it"
        blocked.release.set()
    [failed] = events(caplog, "runner_heartbeat_failed")
    assert "a bug in one beat" in failed["error"]


def test_a_runner_writes_its_per_minute_counts_at_its_heartbeat_while_it_runs(
    blocked: Blocks, registry: Registry, make_runner, configure
):
    """The dashboard's charts are live: counts reach the table within a beat,
    not when the runner stops."""
    configure(heartbeat_seconds=1)
    assert enqueue(JobSpec.now(Blocks.kind, "charted").with_queue("beat"))
    runner = make_runner(registry=registry)
    with running(runner):
        assert blocked.wait_running(1)
        assert wait_until(
            lambda: MinuteCount.objects.filter(queue="beat", started=1).exists(), 5
        ), "the claim is counted at the next heartbeat, while the attempt still runs"
        blocked.release.set()
