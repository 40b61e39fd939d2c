"""The live identity: at most one live row per kind and key.

One mechanism on every database: the unique (kind, key, live), where the
database computes `live` from the state (TRUE while live, NULL once settled).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, connections, transaction

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from jobs.store import Store
from tests.factories import entry_for
from tests.integration.store.support import KIND, T0, claim_one, queue

pytestmark = pytest.mark.django_db


def holds_identity(job: Job) -> bool:
    """Whether the row holds its identity, as the database's `live` column says."""
    return Job.objects.filter(id=job.id).values_list("live", flat=True).get() is not None


def enqueue_k() -> bool:
    return enqueue(JobSpec(kind=KIND, key="k", run_at=T0))


LEAVES_LIVE: dict[str, Callable[[Store, Job], object]] = {
    "complete": lambda store, job: store.complete(job, T0),
    "retire": lambda store, job: store.retire(job, T0, "gave up", entry_for(job, "gave up")),
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

    assert store.retry(job, T0, T0 + timedelta(minutes=1), "503", entry_for(job, "503")) is True
    assert holds_identity(job), "a retried row is queued, so still live"
    assert enqueue_k() is False, "nobody else may take the identity between attempts"


def test_a_requeued_row_takes_its_identity_back(store):
    queue("k")
    job = claim_one(store).job
    store.retire(job, T0, "gave up", entry_for(job, "gave up"))

    assert store.requeue(job.id, T0 + timedelta(minutes=1)) is True
    assert holds_identity(job), "a requeued row is live again"
    assert enqueue_k() is False, "so it holds the identity against new work"


def test_a_requeue_is_refused_while_another_live_row_holds_the_identity(store):
    queue("k")
    old = claim_one(store).job
    store.retire(old, T0, "gave up", entry_for(old, "gave up"))
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
        claimed = claim_one(store, T0 + timedelta(minutes=n)).job
        store.retire(claimed, T0, f"gave up {n}", entry_for(claimed, "gave up"))
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
