"""Fenced settles: complete, retry, retire and reschedule write what each promises, and
only for the attempt that still owns the row, matched on its lease."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from jobs import JobSpec, enqueue
from jobs.history import Outcome
from jobs.models import Job, State
from jobs.store import Store
from tests.factories import entry_for
from tests.integration.store.support import KIND, T0, claim_one, queue, row

pytestmark = pytest.mark.django_db


Settle = Callable[[Store, Job, datetime], bool]


SETTLES: dict[str, Settle] = {
    "complete": lambda store, job, now: store.complete(job, now),
    "retry": lambda store, job, now: store.retry(
        job, now, now + timedelta(minutes=1), "late", entry_for(job, "late", Outcome.RETRY)
    ),
    "retire": lambda store, job, now: store.retire(job, now, "late", entry_for(job, "late")),
    "reschedule": lambda store, job, now: store.reschedule(job, now, now + timedelta(hours=1)),
}


@pytest.mark.parametrize("verb", list(SETTLES))
def test_a_settle_by_an_attempt_whose_row_was_reclaimed_loses_and_writes_nothing(store, verb):
    """A slow attempt that outlived its lease must not overwrite the attempt that took over."""
    queue("k")
    stale = claim_one(store, T0, timedelta(minutes=1)).job
    current = claim_one(store, T0 + timedelta(minutes=2)).job
    before = row(current)

    assert SETTLES[verb](store, stale, T0 + timedelta(minutes=3)) is False, (
        f"{verb} by the stale attempt reports that it lost"
    )
    assert row(current) == before, f"the losing {verb} wrote nothing"
    assert SETTLES[verb](store, current, T0 + timedelta(minutes=3)) is True, (
        f"{verb} by the attempt that owns the row wins"
    )


@pytest.mark.parametrize("verb", list(SETTLES))
def test_a_second_settle_of_an_already_settled_attempt_loses_and_writes_nothing(store, verb):
    queue("k")
    job = claim_one(store).job
    assert store.complete(job, T0 + timedelta(seconds=1)) is True
    before = row(job)

    assert SETTLES[verb](store, job, T0 + timedelta(seconds=2)) is False, (
        f"{verb} after the attempt settled reports that it lost"
    )
    assert row(job) == before, f"the losing {verb} wrote nothing"


@pytest.mark.parametrize("verb", list(SETTLES))
def test_a_stale_attempt_loses_even_when_a_reschedule_has_brought_its_attempt_number_back(
    store, verb
):
    """Reschedule resets attempts to 0, so attempt numbers recur; the lease still fences."""
    queue("k")
    stale = claim_one(store, T0, timedelta(minutes=1)).job
    taken_over = claim_one(store, T0 + timedelta(minutes=2)).job
    assert store.reschedule(taken_over, T0 + timedelta(minutes=3), T0 + timedelta(minutes=4))
    current = claim_one(store, T0 + timedelta(minutes=5)).job
    assert current.attempts == stale.attempts == 1, "the attempt number recurred"
    before = row(current)

    assert SETTLES[verb](store, stale, T0 + timedelta(minutes=6)) is False, (
        f"{verb} by an attempt from before the reschedule loses"
    )
    assert row(current) == before, f"the losing {verb} wrote nothing"


def test_a_lease_with_microseconds_round_trips_so_its_own_settle_wins(store):
    """The fence compares the lease for equality: the stored value must be the one written."""
    queue("k")
    now = T0 + timedelta(microseconds=123_457)
    job = claim_one(store, now, timedelta(seconds=1, microseconds=1)).job

    assert job.lease_expires_at == now + timedelta(seconds=1, microseconds=1)
    assert Job.objects.get(id=job.id).lease_expires_at == job.lease_expires_at
    assert store.complete(job, now) is True, "the attempt's own settle matches its fence"


def test_complete_settles_done_and_releases_the_identity(store):
    queue("k")
    job = claim_one(store).job
    done_at = T0 + timedelta(seconds=3)

    assert store.complete(job, done_at) is True
    stored = Job.objects.get(id=job.id)
    assert stored.state == State.DONE
    assert stored.finished_at == done_at, "a settled row says when it finished"
    assert stored.lease_expires_at is None, "a settled row holds no lease"
    assert enqueue(JobSpec(kind=KIND, key="k", run_at=T0)), "a done row releases its identity"


def test_retry_requeues_at_the_given_time_keeping_the_attempt_count_and_the_error(store):
    queue("k")
    job = claim_one(store).job
    run_at = T0 + timedelta(minutes=10)

    assert (
        store.retry(job, T0, run_at, "upstream said 503", entry_for(job, "upstream said 503"))
        is True
    )
    stored = Job.objects.get(id=job.id)
    assert stored.state == State.QUEUED
    assert stored.run_at == run_at
    assert stored.attempts == 1, "a retry keeps the attempts spent"
    assert stored.last_error == "upstream said 503", "the reason is kept for the operator"
    assert stored.lease_expires_at is None


def test_reschedule_resets_the_attempts_and_keeps_the_row_live_with_its_identity(store):
    queue("k")
    job = claim_one(store).job
    run_at = T0 + timedelta(hours=1)

    assert store.reschedule(job, T0, run_at) is True
    stored = Job.objects.get(id=job.id)
    assert stored.state == State.QUEUED, "a rescheduled row stays live"
    assert stored.attempts == 0, "each occurrence gets a fresh attempt budget"
    assert stored.run_at == run_at
    assert stored.finished_at is None
    assert enqueue(JobSpec(kind=KIND, key="k", run_at=T0)) is False, (
        "a rescheduled row still holds its identity, so a periodic job stays one row"
    )


def test_retire_sets_finished_at_and_releases_the_identity(store):
    queue("k")
    job = claim_one(store).job
    retired_at = T0 + timedelta(seconds=5)

    assert (
        store.retire(job, retired_at, "the payload can never parse", entry_for(job, "unparsable"))
        is True
    )
    stored = Job.objects.get(id=job.id)
    assert stored.state == State.FAILED
    assert stored.finished_at == retired_at
    assert stored.last_error == "the payload can never parse"
    assert stored.lease_expires_at is None
    assert enqueue(JobSpec(kind=KIND, key="k", run_at=T0)) is True, (
        "a retired row releases its identity, so the work can be queued again"
    )
