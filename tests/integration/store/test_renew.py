"""Renewals (`Store.renew`): fenced on each attempt as a settle is, and never
waiting on a row another session has locked; and the database's clock
(`Store.database_now`), which the runner corrects its time by."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections, transaction

from jobs.models import Job, LimitedAttempt
from jobs.store import Store, for_database
from jobs.store.admission import Admission
from jobs.store.base import RENEW_LOCK_TIMEOUT
from tests.integration.store.support import KIND, LEASE, T0, claim_one, queue

pytestmark = pytest.mark.django_db

UNTIL = T0 + timedelta(hours=1)


def lease_of(job: Job) -> datetime | None:
    return Job.objects.get(id=job.id).lease_expires_at


def test_a_renewal_extends_the_leases_of_the_attempts_that_own_their_rows(store: Store):
    queue("a")
    queue("b")
    jobs = [claim.job for claim in store.claim(Admission(T0, {KIND: LEASE}, 2))]

    renewal = store.renew(jobs, UNTIL, [])

    assert renewal.renewed == {job.id for job in jobs}
    assert renewal.held == frozenset()
    assert [lease_of(job) for job in jobs] == [UNTIL, UNTIL]


def test_a_renewal_leaves_a_row_another_runner_took_or_an_operator_cancelled(store: Store):
    queue("taken")
    taken = claim_one(store, T0, timedelta(seconds=1)).job
    queue("cancelled")
    cancelled = claim_one(store, T0).job
    retaken = claim_one(store, T0 + timedelta(seconds=2)).job  # its lease had run out
    assert retaken.id == taken.id
    assert store.cancel(cancelled.id, T0, "by hand") is not None

    renewal = store.renew([taken, cancelled], UNTIL, [])

    assert (renewal.renewed, renewal.held) == (frozenset(), frozenset()), "neither is theirs"
    assert lease_of(retaken) == retaken.lease_expires_at, "the other runner's lease is untouched"
    assert lease_of(cancelled) is None, "the cancelled row is not revived"


def test_a_renewal_fenced_on_the_lease_leaves_a_row_claimed_again_at_the_same_attempt_number(
    store: Store,
):
    """A reschedule brings the attempt number back to 0, so a later claim can
    hold the row at the attempt number a stale attempt still has; only the
    lease tells them apart, as it does for the settles."""
    queue("k")
    stale = claim_one(store, T0, timedelta(seconds=1)).job
    taken = claim_one(store, T0 + timedelta(seconds=2)).job
    assert store.reschedule(taken, T0 + timedelta(seconds=3), T0 + timedelta(seconds=4))
    current = claim_one(store, T0 + timedelta(seconds=5)).job
    assert current.attempts == stale.attempts

    assert store.renew([stale], UNTIL, []).renewed == frozenset()
    assert lease_of(current) == current.lease_expires_at


def test_a_renewal_extends_the_counted_attempts_of_limited_kinds_with_their_rows(store: Store):
    queue("limited")
    job = claim_one(store).job
    LimitedAttempt.objects.create(
        job_id=job.id, kind=KIND, attempts=job.attempts, lease_expires_at=T0 + LEASE
    )

    store.renew([job], UNTIL, [job.id])

    assert LimitedAttempt.objects.get(job_id=job.id).lease_expires_at == UNTIL


@contextmanager
def locked_elsewhere(job: Job) -> Iterator[None]:
    """Hold a lock on `job`'s row in another session (`SELECT ... FOR UPDATE`,
    as an operator's cancel or the project's own code would) for the block."""
    holding, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Job.objects.select_for_update().filter(id=job.id))
                holding.set()
                done.wait(30)
        except BaseException as error:
            errors.append(error)
            holding.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(30), "the other session ran"
        assert not errors, f"the other session locked the row: {errors}"
        yield
    finally:
        done.set()
        thread.join(30)


@pytest.mark.concurrent_db
@pytest.mark.django_db(transaction=True)
def test_a_renewal_skips_a_row_another_session_has_locked_and_renews_the_others_at_once(
    store: Store,
):
    for key in ("a", "locked", "c"):
        queue(key)
    jobs = {claim.job.key: claim.job for claim in store.claim(Admission(T0, {KIND: LEASE}, 3))}

    with locked_elsewhere(jobs["locked"]):
        started = time.monotonic()
        renewal = for_database().renew(list(jobs.values()), UNTIL, [])
        took = time.monotonic() - started

    assert renewal.renewed == {jobs["a"].id, jobs["c"].id}, "the others are renewed"
    assert renewal.held == {jobs["locked"].id}, "the locked row is left for the next beat"
    assert took < RENEW_LOCK_TIMEOUT.total_seconds(), f"without waiting on the lock ({took:.2f} s)"
    assert lease_of(jobs["locked"]) == jobs["locked"].lease_expires_at
    assert {lease_of(jobs[key]) for key in ("a", "c")} == {UNTIL}
    assert for_database().renew([jobs["locked"]], UNTIL, []).renewed == {jobs["locked"].id}, (
        "once the lock is let go, the next renewal renews it"
    )


def test_the_database_clock_reads_the_servers_time_or_nothing_where_it_shares_the_machines(
    store: Store,
):
    before = datetime.now(UTC)
    found = store.database_now()
    after = datetime.now(UTC)
    if connection.vendor == "sqlite":
        assert found is None, "SQLite shares this machine's clock"
        return
    assert found is not None
    assert found.utcoffset() is not None, "an aware time"
    # The server runs on this machine in the tests: the same clock.
    slack = timedelta(milliseconds=5)
    assert before - slack <= found <= after + slack
