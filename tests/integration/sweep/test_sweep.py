"""The retention sweep: one periodic row that keeps the table near its bound.

The sweep is an ordinary handler, so these tests run it through a real runner:
what it deletes (settled rows past `retention_days`, in small batches), what
it never touches (newer settled rows, live rows), and how it stays one row
(a schedule, every hour: one live occurrence, planned once however often
runners reconcile).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from freezegun import freeze_time

import jobs.sweep
from jobs import JobSpec, config, enqueue
from jobs.handlers import Done
from jobs.models import Job, Schedule, State
from jobs.registry import Registry
from jobs.registry import registry as default_registry
from jobs.runner.maintenance import recover_all
from jobs.schedules.reconcile import reconcile
from jobs.store.orm import OrmStore
from jobs.sweep import SweepHandler

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
KIND = "test.swept"


@pytest.fixture
def sweep_registry(registry: Registry) -> Registry:
    registry.register(SweepHandler)
    return registry


def settled(key: str, age: timedelta, state: str = State.DONE) -> Job:
    """A settled row that finished `age` before T0."""
    return Job.objects.create(
        kind=KIND,
        key=key,
        state=state,
        attempts=1,
        max_attempts=5,
        run_at=T0 - age - timedelta(minutes=1),
        finished_at=T0 - age,
    )


def live(key: str, age: timedelta) -> Job:
    """A queued row of a kind no handler answers for, waiting since `age` before T0."""
    assert enqueue(JobSpec(kind=KIND, key=key, run_at=T0 - age))
    return Job.objects.get(kind=KIND, key=key)


def sweep_row() -> Job:
    return Job.objects.get(kind=jobs.sweep.KIND, state__in=[State.QUEUED, State.RUNNING])


def plan_then_sweep(runner, frozen) -> None:
    """Start the runner at T0 (which plans the sweep for the next hour), then
    move to that hour and let it run."""
    runner.drain()
    frozen.tick(jobs.sweep.INTERVAL)
    runner.drain()


def ids(rows: list[Job]) -> set[object]:
    return {row.id for row in rows}


def test_the_sweep_is_registered_in_the_default_registry():
    assert isinstance(default_registry.get(jobs.sweep.KIND), SweepHandler), (
        "every project gets the sweep without registering it"
    )


def test_the_sweep_deletes_settled_rows_past_retention_and_keeps_newer_and_live_rows(
    sweep_registry, make_runner, configure
):
    configure(retention_days=7)
    old = [
        settled("old-done", timedelta(days=8)),
        settled("old-failed", timedelta(days=30), State.FAILED),
        settled("old-cancelled", timedelta(days=7, seconds=1), State.CANCELLED),
    ]
    new = [settled("new-done", timedelta(days=6)), settled("new-failed", timedelta(hours=1))]
    waiting = [live("old-live", timedelta(days=30)), live("new-live", timedelta(days=1))]
    runner = make_runner(registry=sweep_registry)
    with freeze_time(T0) as frozen:
        plan_then_sweep(runner, frozen)

    remaining = set(Job.objects.values_list("id", flat=True))
    assert not ids(old) & remaining, "settled rows older than retention_days are deleted"
    assert ids(new) <= remaining, "settled rows within retention_days are kept"
    assert ids(waiting) <= remaining, "live rows are never swept, however old"


def test_the_sweep_deletes_in_small_batches_until_every_old_row_is_gone(
    sweep_registry, make_runner, configure
):
    """Small batches keep each DELETE's locks brief on a big table."""
    configure(retention_days=7)
    for n in range(5):
        settled(f"old{n}", timedelta(days=8, minutes=n))
    kept = settled("new", timedelta(days=1))
    prune = OrmStore.prune
    runner = make_runner(registry=sweep_registry)
    with (
        mock.patch.object(jobs.sweep, "BATCH", 2),
        mock.patch.object(OrmStore, "prune", autospec=True, side_effect=prune) as spy,
        freeze_time(T0) as frozen,
    ):
        plan_then_sweep(runner, frozen)

    limits = [call.args[2] for call in spy.call_args_list]
    assert len(limits) >= 3, f"five old rows in batches of two take several deletes: {limits}"
    assert set(limits) == {2}, "every delete is limited to one batch"
    assert list(Job.objects.filter(kind=KIND).values_list("id", flat=True)) == [kept.id], (
        "every old row is gone and the newer one is kept"
    )


def test_the_sweep_is_a_schedule_of_one_live_row_due_on_each_hour(
    sweep_registry, make_runner, configure
):
    configure(retention_days=7)
    runner = make_runner(registry=sweep_registry)
    with freeze_time(T0 + timedelta(minutes=20)) as frozen:
        runner.drain()
        first = sweep_row()
        assert (first.key, first.state) == ("schedule:jobs.sweep", State.QUEUED)
        assert first.run_at == T0 + jobs.sweep.INTERVAL, "due at the next hour"

        frozen.move_to(T0 + jobs.sweep.INTERVAL)
        runner.drain()

    first.refresh_from_db()
    assert first.state == State.DONE, "each hour's sweep is an occurrence of its own"
    again = sweep_row()
    assert again.id != first.id
    assert again.run_at == T0 + 2 * jobs.sweep.INTERVAL, "the next one is due an hour later"
    assert Job.objects.filter(kind=jobs.sweep.KIND, live=True).count() == 1


def test_reconciling_twice_plans_exactly_one_sweep(sweep_registry, configure):
    configure(retention_days=7)

    reconcile(sweep_registry)
    reconcile(sweep_registry)

    rows = Job.objects.filter(kind=jobs.sweep.KIND)
    assert rows.count() == 1, "the live identity and the schedule's row keep the sweep one row"
    assert rows.get().state == State.QUEUED


def test_with_retention_off_a_runners_start_plans_no_sweep(sweep_registry, configure):
    configure(retention_days=0)

    recover_all(sweep_registry, dataclasses.replace(config.initial(), retention_days=0))

    assert not Job.objects.filter(kind=jobs.sweep.KIND).exists(), (
        "retention_days = 0 keeps everything, so there is nothing to schedule"
    )
    assert not Schedule.objects.filter(name=jobs.sweep.KIND).exists()


def test_with_retention_off_a_running_sweep_deletes_nothing_and_is_the_last(
    sweep_registry, configure
):
    """A sweep planned before retention was switched off stops repeating."""
    configure(retention_days=7)
    reconcile(sweep_registry)
    configure(retention_days=0)
    old = settled("old", timedelta(days=365))

    outcome = SweepHandler().run(sweep_row())

    assert outcome == Done()
    assert Job.objects.filter(id=old.id).exists(), "nothing is deleted while retention is off"
    assert not Schedule.objects.filter(name=jobs.sweep.KIND).exists(), (
        "its schedule is forgotten, so no next occurrence follows this one"
    )


def test_a_sweep_queued_before_it_was_a_schedule_retires_itself_when_it_runs(configure):
    configure(retention_days=7)
    assert enqueue(JobSpec.now(jobs.sweep.KIND, jobs.sweep.LEGACY_KEY))
    old = settled("old", timedelta(days=365))

    assert SweepHandler().run(Job.objects.get(key=jobs.sweep.LEGACY_KEY)) == Done()
    assert Job.objects.filter(id=old.id).exists(), "the schedule's own occurrence does the sweeping"
