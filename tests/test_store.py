"""The store contract: what every vendor store promises, run against the database in use.

The runner trusts these verbs blindly: a claim that hands one row to two runners,
or a settle that overwrites a newer claim, would run work twice or lose it. So
each promise in `jobs.store.base` has a test here, and the same tests run on
SQLite, PostgreSQL and MySQL/MariaDB. Time is a parameter of every verb, so no clock is
frozen: each test passes its own `now`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections, transaction

from jobs import JobSpec, enqueue
from jobs.models import LIVE_STATES, Job, State
from jobs.store import Claim, Store, for_database
from jobs.store import mysql as mysql_store
from jobs.store import sqlite as sqlite_store
from jobs.store.postgresql import sql as pg_sql

pytestmark = pytest.mark.django_db

#: A fixed instant far from the real clock, so nothing depends on when tests run.
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
KIND = "test.store"
OTHER_KIND = "test.store.other"

only_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="about SQLite's query plan; runs on SQLite"
)
only_mysql = pytest.mark.skipif(
    connection.vendor != "mysql", reason="about MySQL's query plan; runs on MySQL/MariaDB"
)


@pytest.fixture
def store() -> Store:
    return for_database()


def queue(key: str, *, kind: str = KIND, run_at: datetime = T0, **spec: Any) -> Job:
    """Enqueue one job the ordinary way and return its row."""
    assert enqueue(JobSpec(kind=kind, key=key, run_at=run_at, **spec)), f"{kind}:{key} is new"
    return live(kind, key)


def live(kind: str, key: str) -> Job:
    return Job.objects.get(kind=kind, key=key, state__in=LIVE_STATES)


def row(job: Job) -> dict[str, Any]:
    """Every column of the row as the database holds it now."""
    return dict(Job.objects.filter(id=job.id).values().get())


def settled_row(key: str, finished_at: datetime, state: str = State.DONE) -> Job:
    return Job.objects.create(
        kind=KIND,
        key=key,
        state=state,
        attempts=1,
        max_attempts=5,
        run_at=finished_at - timedelta(minutes=1),
        finished_at=finished_at,
    )


def claim_one(store: Store, now: datetime = T0, lease: timedelta = LEASE) -> Claim:
    claims = store.claim(now, {KIND: lease}, 10)
    assert len(claims) == 1, f"exactly one row was ready at {now}, claimed {claims}"
    return claims[0]


# -- claim: which rows --------------------------------------------------------------


def test_claim_takes_queued_rows_that_are_due_and_leaves_future_rows_untouched(store):
    due = queue("due", run_at=T0 - timedelta(seconds=1))
    exactly_now = queue("exactly-now", run_at=T0)
    future = queue("future", run_at=T0 + timedelta(seconds=1))
    before = row(future)

    claimed = {c.job.id for c in store.claim(T0, {KIND: LEASE}, 10)}

    assert claimed == {due.id, exactly_now.id}, "a row is ready once run_at <= now"
    assert row(future) == before, "a row whose run_at is still ahead is not touched at all"


def test_claim_counts_the_attempt_and_writes_each_kinds_own_lease(store):
    queue("a", kind=KIND)
    queue("b", kind=OTHER_KIND)
    leases = {KIND: timedelta(minutes=5), OTHER_KIND: timedelta(seconds=42)}

    claims = {c.job.kind: c for c in store.claim(T0, leases, 10)}

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

    claims = store.claim(T0, {KIND: LEASE}, 3)

    assert len(claims) == 3, "a claim never returns more rows than its limit"
    assert {c.job.id for c in claims} == {jobs[n].id for n in (5, 4, 3)}, (
        "the rows that have waited longest are claimed first"
    )
    assert Job.objects.filter(state=State.QUEUED).count() == 2, "the others stay queued"


def test_claim_lists_the_claimed_rows_in_run_at_order(store):
    """`Store.claim` promises its rows "in run_at order", and the runner hands them
    to workers (and logs them) in the order the store returns them."""
    offsets = [7, 3, 11, 1, 9, 5, 12, 2, 10, 4, 8, 6]
    for n in offsets:
        queue(f"k{n}", run_at=T0 - timedelta(minutes=n))

    claims = store.claim(T0, {KIND: LEASE}, 10)

    run_ats = [c.job.run_at for c in claims]
    assert run_ats == sorted(run_ats), "a claim lists its rows oldest run_at first"


def test_claim_returns_only_kinds_it_was_given_a_lease_for(store):
    mine = queue("mine")
    unknown = queue("theirs", kind="test.store.unknown")

    claims = store.claim(T0, {KIND: LEASE}, 10)

    assert [c.job.id for c in claims] == [mine.id]
    stored = Job.objects.get(id=unknown.id)
    assert stored.state == State.QUEUED, "a row of a kind nobody handles stays queued"
    assert stored.attempts == 0, "and no attempt is counted against it"


def test_claim_with_no_kinds_or_no_room_claims_nothing(store):
    queue("k")

    assert store.claim(T0, {}, 10) == [], "no handlers, no claim"
    assert store.claim(T0, {KIND: LEASE}, 0) == [], "no free slot, no claim"
    assert live(KIND, "k").attempts == 0, "nothing was counted"


# -- claim: expired leases and exclusivity --------------------------------------------


def test_a_running_row_is_reclaimed_once_its_lease_has_expired_and_not_before(store):
    queue("k")
    first = claim_one(store, T0, timedelta(minutes=1))

    assert store.claim(T0 + timedelta(seconds=59), {KIND: LEASE}, 10) == [], (
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

    first = store.claim(T0, {KIND: LEASE}, 3)
    second = store.claim(T0, {KIND: LEASE}, 10)
    third = store.claim(T0, {KIND: LEASE}, 10)

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
                mine.extend(c.job.id for c in own.claim(T0, {KIND: LEASE}, 7))
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
                first.extend(c.job.id for c in for_database().claim(T0, {KIND: LEASE}, 2))
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
        beside = [c.job.id for c in store.claim(T0, {KIND: LEASE}, 2)]
    finally:
        release.set()
        thread.join(30)

    assert not errors, f"the first claim failed: {errors}"
    assert len(first) == 2, "the first claim took the two oldest rows"
    assert len(beside) == 2, "the claim beside it still found two unlocked ready rows"
    assert not set(first) & set(beside), "and no row went to both"
    keys = set(Job.objects.filter(id__in=beside).values_list("key", flat=True))
    assert keys == {"k02", "k03"}, "the next oldest, not rows from further back"


# -- fenced settles ------------------------------------------------------------------

Settle = Callable[[Store, Job, datetime], bool]

SETTLES: dict[str, Settle] = {
    "complete": lambda store, job, now: store.complete(job, now),
    "retry": lambda store, job, now: store.retry(job, now, now + timedelta(minutes=1), "late"),
    "retire": lambda store, job, now: store.retire(job, now, "late"),
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

    assert store.retry(job, T0, run_at, "upstream said 503") is True
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

    assert store.retire(job, retired_at, "the payload can never parse") is True
    stored = Job.objects.get(id=job.id)
    assert stored.state == State.FAILED
    assert stored.finished_at == retired_at
    assert stored.last_error == "the payload can never parse"
    assert stored.lease_expires_at is None
    assert enqueue(JobSpec(kind=KIND, key="k", run_at=T0)) is True, (
        "a retired row releases its identity, so the work can be queued again"
    )


# -- the live identity ---------------------------------------------------------------
#
# One mechanism on every database: the unique (kind, key, live), where the
# database computes `live` from the state (TRUE while live, NULL once settled).


def holds_identity(job: Job) -> bool:
    """Whether the row holds its identity, as the database's `live` column says."""
    return Job.objects.filter(id=job.id).values_list("live", flat=True).get() is not None


def enqueue_k() -> bool:
    return enqueue(JobSpec(kind=KIND, key="k", run_at=T0))


LEAVES_LIVE: dict[str, Callable[[Store, Job], object]] = {
    "complete": lambda store, job: store.complete(job, T0),
    "retire": lambda store, job: store.retire(job, T0, "gave up"),
    "cancel": lambda store, job: store.cancel(job.id, T0, "cancelled by ops"),
}


@pytest.mark.parametrize("verb", list(LEAVES_LIVE))
def test_every_settle_that_leaves_the_live_states_releases_the_identity(store, verb):
    queue("k")
    job = claim_one(store).job
    assert holds_identity(job), "a running row holds its identity"

    assert LEAVES_LIVE[verb](store, job)
    assert not holds_identity(job), f"{verb} released the identity"
    assert enqueue_k() is True, f"after {verb}, the identity is free for new work"


def test_a_retry_keeps_the_identity_while_the_row_waits_for_its_next_attempt(store):
    queue("k")
    job = claim_one(store).job

    assert store.retry(job, T0, T0 + timedelta(minutes=1), "503") is True
    assert holds_identity(job), "a retried row is queued, so still live"
    assert enqueue_k() is False, "nobody else may take the identity between attempts"


def test_a_requeued_row_takes_its_identity_back(store):
    queue("k")
    job = claim_one(store).job
    store.retire(job, T0, "gave up")

    assert store.requeue(job.id, T0 + timedelta(minutes=1)) is True
    assert holds_identity(job), "a requeued row is live again"
    assert enqueue_k() is False, "so it holds the identity against new work"


def test_a_requeue_is_refused_while_another_live_row_holds_the_identity(store):
    queue("k")
    old = claim_one(store).job
    store.retire(old, T0, "gave up")
    newer = queue("k")

    with pytest.raises(IntegrityError), transaction.atomic():
        store.requeue(old.id, T0 + timedelta(minutes=1))
    assert Job.objects.get(id=old.id).state == State.FAILED, "the refused requeue wrote nothing"
    assert holds_identity(newer), "the newer row keeps the identity"
    assert not holds_identity(old)


def test_the_identity_is_the_databases_rule_even_for_writes_outside_the_store(store):
    """The database derives `live`, so an UPDATE that forgets the identity cannot break it."""
    job = queue("k")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(kind=KIND, key="k", max_attempts=1, run_at=T0)

    Job.objects.filter(id=job.id).update(state=State.CANCELLED)
    assert enqueue_k() is True, "a row settled by a plain UPDATE released its identity"
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(id=job.id).update(state=State.QUEUED)


def test_settled_rows_of_one_identity_never_collide_with_each_other(store):
    for n in range(3):
        job = queue("k")
        store.retire(claim_one(store, T0 + timedelta(minutes=n)).job, T0, f"gave up {n}")
        assert not holds_identity(job)
    assert Job.objects.filter(kind=KIND, key="k", state=State.FAILED).count() == 3


@pytest.mark.django_db(transaction=True)
def test_of_racing_enqueues_of_a_just_released_identity_exactly_one_wins(store):
    """The identity a settled row released is taken again by one racer, however many.

    Round after round, since the hazard is a window: on MySQL the released
    entry lingers in the unique index until purge, and racers that both find
    it used to deadlock instead of one hearing False.
    """
    racers = 8

    def race(n: int) -> bool:
        connection.ensure_connection()
        together.wait(30)
        with transaction.atomic():
            return enqueue_k()

    for round_ in range(6):
        now = T0 + timedelta(minutes=round_)
        if round_ == 0:
            queue("k")
        store.complete(claim_one(store, now).job, now)
        together = threading.Barrier(racers)
        results = in_threads(racers, race)

        assert results.count(True) == 1, f"round {round_}: exactly one racer wins: {results}"
        assert results.count(False) == racers - 1, f"round {round_}: the others hear False"
        assert Job.objects.filter(kind=KIND, key="k", live=True).count() == 1


def in_threads(count: int, work: Callable[[int], bool]) -> list[bool | BaseException]:
    """`work(i)` on `count` threads, each on its own connection; each result or error."""
    results: list[bool | BaseException] = [False] * count

    def target(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as error:
            results[i] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_a_lease_with_microseconds_round_trips_so_its_own_settle_wins(store):
    """The fence compares the lease for equality: the stored value must be the one written."""
    queue("k")
    now = T0 + timedelta(microseconds=123_457)
    job = claim_one(store, now, timedelta(seconds=1, microseconds=1)).job

    assert job.lease_expires_at == now + timedelta(seconds=1, microseconds=1)
    assert Job.objects.get(id=job.id).lease_expires_at == job.lease_expires_at
    assert store.complete(job, now) is True, "the attempt's own settle matches its fence"


# -- prune ----------------------------------------------------------------------------


def test_prune_deletes_only_settled_rows_that_finished_before_the_cutoff(store):
    before = T0
    old = [
        settled_row("old-done", before - timedelta(days=3)),
        settled_row("old-failed", before - timedelta(days=2), State.FAILED),
        settled_row("old-cancelled", before - timedelta(seconds=1), State.CANCELLED),
    ]
    new = [
        settled_row("new-done", before + timedelta(seconds=1)),
        settled_row("at-cutoff", before),
    ]
    queued = queue("live-queued", run_at=before - timedelta(days=30))
    running = queue("live-running", run_at=before - timedelta(days=30))
    claim_ids = {c.job.id for c in store.claim(before - timedelta(days=29), {KIND: LEASE}, 10)}
    assert claim_ids == {queued.id, running.id}
    Job.objects.filter(id=queued.id).update(state=State.QUEUED, lease_expires_at=None)
    # A live row carrying an old finished_at must still never be deleted.
    Job.objects.filter(id=running.id).update(finished_at=before - timedelta(days=30))

    assert store.prune(before, 100) == len(old)

    remaining = set(Job.objects.values_list("id", flat=True))
    assert not remaining & {job.id for job in old}, "settled rows past the cutoff are deleted"
    assert {job.id for job in new} <= remaining, "settled rows newer than the cutoff stay"
    assert {queued.id, running.id} <= remaining, "live rows are never pruned"


def test_prune_deletes_at_most_limit_rows_per_call(store):
    for n in range(5):
        settled_row(f"old{n}", T0 - timedelta(days=10, minutes=n))

    counts = [store.prune(T0, 2) for _ in range(4)]

    assert counts == [2, 2, 1, 0], "each call deletes at most its limit, until none are left"
    assert not Job.objects.exists()


# -- the claim uses its index ---------------------------------------------------------


@pytest.mark.postgresql
def test_the_postgresql_claim_finds_ready_rows_through_the_jobs_job_ready_index(store):
    """A million settled rows must not slow the claim: they never enter the partial index."""
    settled = [
        Job(
            kind=KIND,
            key=f"settled{n}",
            state=State.DONE,
            attempts=1,
            max_attempts=5,
            run_at=T0 - timedelta(days=1, seconds=n),
            finished_at=T0 - timedelta(days=1),
        )
        for n in range(20_000)
    ]
    Job.objects.bulk_create(settled, batch_size=5_000)
    for n in range(5):
        queue(f"ready{n}", run_at=T0 - timedelta(minutes=n))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
        params: dict[str, Any] = {
            "now": T0,
            "kinds": [KIND],
            "expires": [T0 + LEASE],
            "limit": 8,
        }
        cursor.execute("EXPLAIN " + pg_sql.CLAIM_SQL, params)
        plan = "\n".join(line for (line,) in cursor.fetchall())

    assert "jobs_job_ready" in plan, f"the claim reads ready rows from the index:\n{plan}"
    assert live(KIND, "ready0").attempts == 0, "EXPLAIN claimed nothing"


@pytest.mark.postgresql
def test_a_postgresql_claim_rewrites_each_row_in_place_without_writing_an_index_entry(store):
    """Queued to running keeps `live`, the only column the partial indexes'
    conditions read, so each claimed row's new version is a HOT update: the
    claim adds nothing to the table's five indexes."""
    for n in range(8):
        queue(f"hot{n}", run_at=T0 - timedelta(seconds=n))

    with connection.cursor() as cursor:
        cursor.execute(HOT_UPDATES_SQL)
        (before,) = cursor.fetchone()
        assert len(store.claim(T0, {KIND: LEASE}, 8)) == 8
        cursor.execute(HOT_UPDATES_SQL)
        (after,) = cursor.fetchone()

    assert after - before == 8, "every claimed row was updated in place"


@pytest.mark.postgresql
def test_the_postgresql_jobs_table_leaves_a_fifth_of_each_page_for_claims(store):
    """Without room on its page, a claimed row's new version goes to another
    page, and that update writes an entry in every index after all."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'jobs_job'::regclass")
        (options,) = cursor.fetchone()

    assert "fillfactor=80" in (options or [])


#: Rows of jobs_job updated in place (HOT) by the current transaction.
HOT_UPDATES_SQL = "SELECT pg_stat_get_xact_tuples_hot_updated('jobs_job'::regclass)"


@only_sqlite
def test_the_sqlite_claim_finds_ready_rows_through_the_jobs_job_ready_index(store):
    """Django never runs ANALYZE, so the plan must be right on a database without statistics.

    Any other plan reads every live row of the handled kinds and sorts them, under
    the write lock, on every claim: cost grows with the backlog instead of the limit.
    """
    settled_row("settled", T0 - timedelta(days=1))
    queue("ready")
    at = store.prepare("run_at", T0)
    sql = sqlite_store.SELECT_READY_SQL.format(kinds="%s")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, [at, KIND, at, 8])
        plan = "\n".join(str(line[-1]) for line in cursor.fetchall())

    assert "jobs_job_ready" in plan, f"the claim reads ready rows from the index:\n{plan}"


@only_mysql
@pytest.mark.django_db(transaction=True)  # ANALYZE TABLE commits implicitly
def test_the_mysql_claim_finds_ready_rows_through_the_live_state_index(store):
    """MySQL has no partial index: the claim's range must still skip settled rows."""
    settled = [
        Job(
            kind=KIND,
            key=f"settled{n}",
            state=State.DONE,
            attempts=1,
            max_attempts=5,
            run_at=T0 - timedelta(days=1, seconds=n),
            finished_at=T0 - timedelta(days=1),
        )
        for n in range(20_000)
    ]
    Job.objects.bulk_create(settled, batch_size=5_000)
    for n in range(5):
        queue(f"ready{n}", run_at=T0 - timedelta(minutes=n))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE TABLE jobs_job")
        cursor.fetchall()
        sql = mysql_store.SELECT_READY_SQL.format(kinds="%s")
        at = store.prepare("run_at", T0)
        cursor.execute("EXPLAIN " + sql, [at, KIND, at, 8])
        columns = [column[0] for column in cursor.description]
        plan = [dict(zip(columns, line, strict=True)) for line in cursor.fetchall()]

    assert plan[0]["key"] == "jobs_job_ready_by_state", f"the claim reads the index:\n{plan}"


# -- settle_and_claim: the runner's pass ----------------------------------------


def test_a_batch_settle_keeps_each_result_exactly_whatever_characters_it_holds(store):
    """The batch settles pass results through text the store writes itself."""
    for n in range(3):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=10 - n))
    claims = store.claim(T0, {KIND: LEASE}, 3)
    results = [
        {"text": 'a "quoted" word, a \\ backslash and {braces}', "n": [1, None, {"x": True}]},
        None,
        {"unicode": "caf\u00e9 \u2603", "comma,key": "NULL"},
    ]
    later = T0 + timedelta(seconds=1)

    won, _ = store.settle_and_claim(
        [(c.job, result) for c, result in zip(claims, results, strict=True)],
        later,
        {KIND: LEASE},
        1,
    )

    assert won == {c.job.id for c in claims}
    assert [row(c.job)["result"] for c in claims] == results, "each result as it was returned"


def test_settle_and_claim_settles_the_done_rows_and_claims_fresh_ones_in_one_go(store):
    for n in range(4):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=10 - n))
    first = store.claim(T0, {KIND: LEASE}, 2)
    later = T0 + timedelta(seconds=1)

    won, claims = store.settle_and_claim(
        [(c.job, {"n": i}) for i, c in enumerate(first)], later, {KIND: LEASE}, 2
    )

    assert won == {c.job.id for c in first}, "both attempts settled"
    for i, c in enumerate(first):
        settled = row(c.job)
        assert (settled["state"], settled["result"]) == (State.DONE, {"n": i})
    assert {c.job.key for c in claims} == {"k2", "k3"}, "the pass went on to claim the rest"
    assert all(row(c.job)["state"] == State.RUNNING for c in claims)


def test_settle_and_claim_never_settles_a_row_a_newer_claim_holds(store):
    queue("k")
    (stale,) = store.claim(T0, {KIND: LEASE}, 1)
    after_expiry = T0 + LEASE + timedelta(seconds=1)
    (newer,) = store.claim(after_expiry, {KIND: LEASE}, 1)

    won, claims = store.settle_and_claim([(stale.job, None)], after_expiry, {KIND: LEASE}, 1)

    assert won == set(), "the stale attempt lost its row and wrote nothing"
    assert claims == [], "the row is held by the newer claim's live lease"
    assert row(newer.job)["state"] == State.RUNNING
    assert row(newer.job)["attempts"] == 2


def test_settle_and_claim_does_not_claim_a_row_it_is_settling(store):
    """A row whose lease has run out is ready again; the same pass must not both
    settle it and hand it out as a fresh claim."""
    queue("k")
    (attempt,) = store.claim(T0, {KIND: LEASE}, 1)
    after_expiry = T0 + LEASE + timedelta(seconds=1)

    won, claims = store.settle_and_claim([(attempt.job, None)], after_expiry, {KIND: LEASE}, 5)

    assert won == {attempt.job.id}, "the attempt still owned its row and settled it"
    assert claims == [], "and the row was not claimed again in the same pass"
    assert row(attempt.job)["state"] == State.DONE


def _prepared_claims() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%FOR UPDATE SKIP LOCKED%"],
        )
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)  # to start a new session
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "not-prepared"])
def test_the_postgresql_claim_is_prepared_once_per_connection_unless_settings_say_not(
    store, settings, prepared
):
    """Planning was ~40% of a small pass; a pooler that cannot keep prepared
    statements needs a way to turn them off."""
    settings.JOBS_PREPARED_STATEMENTS = prepared
    connection.close()  # a fresh session, with no statement prepared yet
    for n in range(3):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=n))

    for _ in range(3):
        store.claim(T0, {KIND: LEASE}, 1)

    assert _prepared_claims() == (1 if prepared else 0)
    assert Job.objects.filter(state=State.RUNNING).count() == 3, "every claim still claimed"
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        (mode,) = cursor.fetchone()
    assert mode == ("force_generic_plan" if prepared else "auto"), (
        "a prepared claim is planned once, not at every execution"
    )


def test_a_claimed_job_holds_what_the_orm_would_load_for_its_row(store):
    """The claim builds its `Job` without `Model.__init__`; it must still be
    the same instance the ORM would give for the row, field by field."""
    queue("k", payload={"order": 7}, deadline=T0 + timedelta(hours=1))
    (claim,) = store.claim(T0, {KIND: LEASE}, 1)
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
