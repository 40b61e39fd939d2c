"""Claim: which rows it takes (due, oldest first, at most its limit, only kinds it has
a lease for), how it counts the attempt and writes the lease, what it loads, and
that no row goes to two claims, one after the other or at once."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta

import pytest
from django.db import connections, transaction

from jobs.models import Job, State
from jobs.store import for_database
from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, claim_one, live, queue, row

pytestmark = pytest.mark.django_db


OTHER_KIND = "test.store.other"


def test_claim_takes_queued_rows_that_are_due_and_leaves_future_rows_untouched(store):
    due = queue("due", run_at=T0 - timedelta(seconds=1))
    exactly_now = queue("exactly-now", run_at=T0)
    future = queue("future", run_at=T0 + timedelta(seconds=1))
    before = row(future)

    claimed = {c.job.id for c in store.claim(Admission(T0, {KIND: LEASE}, 10))}

    assert claimed == {due.id, exactly_now.id}, "a row is ready once run_at <= now"
    assert row(future) == before, "a row whose run_at is still ahead is not touched at all"


def test_claim_counts_the_attempt_and_writes_each_kinds_own_lease(store):
    queue("a", kind=KIND)
    queue("b", kind=OTHER_KIND)
    leases = {KIND: timedelta(minutes=5), OTHER_KIND: timedelta(seconds=42)}

    claims = {c.job.kind: c for c in store.claim(Admission(T0, leases, 10))}

    assert set(claims) == {KIND, OTHER_KIND}
    for kind, lease in leases.items():
        job = claims[kind].job
        stored = live(kind, job.key)
        assert claims[kind].reclaimed is False, "a queued row is claimed, not reclaimed"
        assert job.state == stored.state == State.RUNNING, "a claimed row is running"
        assert job.attempts == stored.attempts == 1, "the claim counts the attempt"
        assert job.lease_expires_at == stored.lease_expires_at == T0 + lease, (
            "the lease is now plus the lease of the row's own kind"
        )


def test_claim_returns_at_most_limit_rows_and_takes_the_oldest_run_at_first(store):
    # Inserted out of run_at order, so insertion order cannot pass for run_at order.
    offsets = [3, 1, 5, 2, 4]
    jobs = {n: queue(f"k{n}", run_at=T0 - timedelta(minutes=n)) for n in offsets}

    claims = store.claim(Admission(T0, {KIND: LEASE}, 3))

    assert len(claims) == 3, "a claim never returns more rows than its limit"
    assert {c.job.id for c in claims} == {jobs[n].id for n in (5, 4, 3)}, (
        "the rows that have waited longest are claimed first"
    )
    assert Job.objects.filter(state=State.QUEUED).count() == 2, "the others stay queued"


def test_claim_lists_the_claimed_rows_in_claim_order(store):
    """`Store.claim` promises its rows in claim order (one priority here, so
    oldest run_at first), and the runner hands them to workers (and logs them)
    in the order the store returns them."""
    offsets = [7, 3, 11, 1, 9, 5, 12, 2, 10, 4, 8, 6]
    for n in offsets:
        queue(f"k{n}", run_at=T0 - timedelta(minutes=n))

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10))

    run_ats = [c.job.run_at for c in claims]
    assert run_ats == sorted(run_ats), "a claim lists its rows oldest run_at first"


def test_claim_returns_only_kinds_it_was_given_a_lease_for(store):
    mine = queue("mine")
    unknown = queue("theirs", kind="test.store.unknown")

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10))

    assert [c.job.id for c in claims] == [mine.id]
    stored = Job.objects.get(id=unknown.id)
    assert stored.state == State.QUEUED, "a row of a kind nobody handles stays queued"
    assert stored.attempts == 0, "and no attempt is counted against it"


def test_claim_with_no_kinds_or_no_room_claims_nothing(store):
    queue("k")

    assert store.claim(Admission(T0, {}, 10)) == [], "no handlers, no claim"
    assert store.claim(Admission(T0, {KIND: LEASE}, 0)) == [], "no free slot, no claim"
    assert live(KIND, "k").attempts == 0, "nothing was counted"


def test_a_claimed_job_holds_what_the_orm_would_load_for_its_row(store):
    """The claim builds its `Job` without `Model.__init__`; it must still be
    the same instance the ORM would give for the row, field by field."""
    queue("k", payload={"order": 7}, deadline=T0 + timedelta(hours=1))
    (claim,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    loaded = Job.objects.get(id=claim.job.id)

    for field in Job._meta.concrete_fields:
        if not field.generated:
            value, expected = getattr(claim.job, field.attname), getattr(loaded, field.attname)
            assert value == expected, field.name
            if isinstance(expected, datetime):
                assert value.tzinfo == expected.tzinfo, f"{field.name} is in the ORM's zone"
    assert claim.job == loaded
    assert not claim.job._state.adding
    assert claim.job._state.db == loaded._state.db
    assert claim.job.live is True, "a column the claim does not read is loaded when asked for"


def test_a_running_row_is_reclaimed_once_its_lease_has_expired_and_not_before(store):
    queue("k")
    first = claim_one(store, T0, timedelta(minutes=1))

    assert store.claim(Admission(T0 + timedelta(seconds=59), {KIND: LEASE}, 10)) == [], (
        "a row whose lease still runs belongs to its runner"
    )
    later = T0 + timedelta(minutes=2)
    second = claim_one(store, later)

    assert second.job.id == first.job.id
    assert second.reclaimed is True, "taking over an expired lease is reported as a reclaim"
    assert second.job.attempts == 2, "the vanished attempt still counts"
    assert second.job.lease_expires_at == later + LEASE, "the new claim writes a new lease"


def test_two_sequential_claims_never_return_the_same_row(store):
    for n in range(5):
        queue(f"k{n}")

    first = store.claim(Admission(T0, {KIND: LEASE}, 3))
    second = store.claim(Admission(T0, {KIND: LEASE}, 10))
    third = store.claim(Admission(T0, {KIND: LEASE}, 10))

    first_ids = {c.job.id for c in first}
    second_ids = {c.job.id for c in second}
    assert len(first_ids) == 3
    assert len(second_ids) == 2
    assert not first_ids & second_ids, "a claimed row is not ready for the next claim"
    assert third == [], "once every row is claimed, nothing is left to claim"


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_on_their_own_connections_never_return_one_row_twice(store):
    """The claim is the one place two runners meet; a duplicate would run a job twice."""
    total = 200
    for n in range(total):
        queue(f"k{n:03d}", run_at=T0 - timedelta(seconds=n % 7))
    threads_count = 6
    # Every round, all threads claim at once; between rounds they agree whether
    # anything is left, so they all stop on the same round.
    together = threading.Barrier(threads_count)
    results: list[list[uuid.UUID]] = [[] for _ in range(threads_count)]
    errors: list[BaseException] = []

    def claim_until_empty(mine: list[uuid.UUID]) -> None:
        try:
            own = for_database()
            while True:
                together.wait(30)
                mine.extend(c.job.id for c in own.claim(Admission(T0, {KIND: LEASE}, 7)))
                together.wait(30)
                if not Job.objects.filter(state=State.QUEUED).exists():
                    return
        except BaseException as error:
            errors.append(error)
            together.abort()
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=claim_until_empty, args=(results[n],)) for n in range(threads_count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert not errors, f"no claim failed: {errors}"
    assert not any(thread.is_alive() for thread in threads), "every claiming thread finished"
    claimed = [job_id for mine in results for job_id in mine]
    assert len(claimed) == len(set(claimed)), "no row was returned to two claims"
    assert set(claimed) == set(Job.objects.values_list("id", flat=True)), (
        "between them the claims took every ready row"
    )
    assert sum(1 for mine in results if mine) > 1, "the claims really did run side by side"
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}, (
        "every row was counted exactly once"
    )


@pytest.mark.concurrent_db
@pytest.mark.django_db(transaction=True)
def test_a_claim_still_open_holds_only_the_rows_it_took_so_a_claim_beside_it_takes_the_next(
    store,
):
    """Scale-out needs the second runner to find work while the first is mid-claim.

    A claim that locked more rows than it took (InnoDB locks every row it reads
    before an ORDER BY ... LIMIT) would leave the runner beside it finding only
    locked rows: nothing claimed, and a `--burst` runner would exit early.
    """
    for n in range(12):
        queue(f"k{n:02d}", run_at=T0 - timedelta(seconds=12 - n))
    holding = threading.Event()
    release = threading.Event()
    first: list[uuid.UUID] = []
    errors: list[BaseException] = []

    def claim_and_hold() -> None:
        try:
            with transaction.atomic():  # the claim's locks stay until this commits
                first.extend(
                    c.job.id for c in for_database().claim(Admission(T0, {KIND: LEASE}, 2))
                )
                holding.set()
                release.wait(30)
        except BaseException as error:
            errors.append(error)
            holding.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=claim_and_hold)
    thread.start()
    try:
        assert holding.wait(30), "the first claim ran"
        beside = [c.job.id for c in store.claim(Admission(T0, {KIND: LEASE}, 2))]
    finally:
        release.set()
        thread.join(30)

    assert not errors, f"the first claim failed: {errors}"
    assert len(first) == 2, "the first claim took the two oldest rows"
    assert len(beside) == 2, "the claim beside it still found two unlocked ready rows"
    assert not set(first) & set(beside), "and no row went to both"
    keys = set(Job.objects.filter(id__in=beside).values_list("key", flat=True))
    assert keys == {"k02", "k03"}, "the next oldest, not rows from further back"
