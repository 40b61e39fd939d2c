"""The in-process wake-up: `enqueue` rings every runner's doorbell in this process when
the caller's transaction commits, and never for a row that was rolled back or
refused. On PostgreSQL the commit also sends a NOTIFY to other processes:
test_wakeup_postgresql.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import transaction

from jobs import Done, JobHandler, JobSpec, enqueue, enqueue_or_log, wakeup
from jobs.config import JobsSettings
from jobs.models import Job, State
from jobs.runner import Runner
from tests.helpers import start_loop
from tests.integration.enqueue.support import Rollback, enqueue_then_roll_back


@pytest.fixture
def doorbell() -> Iterator[threading.Event]:
    """A runner's view of the wake-up: an event that `enqueue` rings on commit."""
    event = wakeup.doorbell.subscribe()
    yield event
    wakeup.doorbell.unsubscribe(event)


@pytest.mark.django_db(transaction=True)
def test_enqueue_rings_the_doorbell_when_the_callers_transaction_commits(doorbell):
    with transaction.atomic():
        assert enqueue(JobSpec.now("orders.ship", "ord-1"))
        assert not doorbell.is_set(), "no runner is woken for a row it cannot see yet"
    assert doorbell.is_set(), "the commit wakes the runners in this process"


@pytest.mark.django_db(transaction=True)
def test_enqueue_outside_a_transaction_rings_the_doorbell_at_once(doorbell):
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    assert doorbell.is_set(), "in autocommit the row is committed, so the runners are woken"


@pytest.mark.django_db(transaction=True)
def test_enqueue_or_log_rings_the_doorbell_on_commit_too(doorbell):
    assert enqueue_or_log(JobSpec.now("orders.ship", "ord-1"))
    assert doorbell.is_set(), "enqueue_or_log wakes the runners like enqueue"


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_enqueue_never_rings_the_doorbell(doorbell):
    with pytest.raises(Rollback):
        enqueue_then_roll_back(JobSpec.now("orders.ship", "ord-1"))
    assert not doorbell.is_set(), "a job that was rolled back wakes nobody"


@pytest.mark.django_db(transaction=True)
def test_a_refused_duplicate_never_rings_the_doorbell(doorbell):
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    doorbell.clear()
    assert not enqueue(JobSpec.now("orders.ship", "ord-1")), "the duplicate is refused"
    assert not doorbell.is_set(), "nothing new was queued, so nobody is woken"


@pytest.mark.django_db(transaction=True)
def test_every_subscribed_runner_is_woken():
    """One event per runner: a runner clearing its own doorbell never swallows another's."""
    first, second = wakeup.doorbell.subscribe(), wakeup.doorbell.subscribe()
    try:
        assert enqueue(JobSpec.now("orders.ship", "ord-1"))
        assert first.is_set(), "the first runner is woken"
        assert second.is_set(), "and the second"
    finally:
        wakeup.doorbell.unsubscribe(first)
        wakeup.doorbell.unsubscribe(second)


@pytest.mark.django_db(transaction=True)
def test_a_runner_in_this_process_starts_a_fresh_job_long_before_its_poll_interval(
    registry, make_runner, monkeypatch
):
    """The doorbell is what makes an in-process runner start work at once, not a minute later."""
    started = threading.Event()

    @registry.register
    class Recording(JobHandler):
        kind = "test.wakeup"

        def run(self, job):
            started.set()
            return Done()

    runner: Runner = make_runner(
        registry=registry, settings=lambda: JobsSettings(poll_interval_ms=60_000)
    )
    first_pass_done = threading.Event()
    run_pass = runner.run_pass

    def observed_pass() -> tuple[int, int]:
        result = run_pass()
        first_pass_done.set()
        return result

    monkeypatch.setattr(runner, "run_pass", observed_pass)

    thread = start_loop(runner)
    try:
        assert first_pass_done.wait(10), "the runner made its first (empty) pass"
        assert enqueue(JobSpec.now("test.wakeup", "k"))
        assert started.wait(5), "the job started within seconds, not after the 60 s poll"
    finally:
        runner.stop()
        thread.join(10)
    assert not thread.is_alive(), "the runner's loop stopped when asked"
    assert runner.finish(10), "the attempt finished"
    assert Job.objects.get(kind="test.wakeup").state == State.DONE, "and the job settled done"


def test_the_old_names_of_the_wake_up_still_answer_with_a_deprecation_warning():
    """The doorbell and the store's `wakes_other_processes` moved to `jobs.notifier`;
    code written against the old names keeps working, warned."""
    import importlib
    import sys

    from jobs import notifier
    from jobs.notifier import sqlite_doorbell
    from jobs.store import for_database

    sys.modules.pop("jobs.store.sqlite_doorbell", None)
    with pytest.warns(DeprecationWarning, match="import jobs.notifier.sqlite_doorbell"):
        old = importlib.import_module("jobs.store.sqlite_doorbell")
    assert old is sqlite_doorbell, "the old path is the moved module itself"
    with pytest.warns(DeprecationWarning, match="ask jobs.notifier.for_database"):
        said = for_database().wakes_other_processes
    assert said is notifier.for_database().wakes_other_processes
