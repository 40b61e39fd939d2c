"""On PostgreSQL a runner's pass commits without waiting for the WAL flush; every
other write still waits for it.

A pass's commit is what bounds a runner on a busy server: each one waits for
the WAL to reach the disk behind every other client's writes. Losing a
pass's last fraction of a second in a PostgreSQL crash only makes its jobs run
again, which every handler must allow; an enqueue, a retry or a retirement
lost that way would lose a job, an attempt's backoff or an `abandon`, so
those still wait. The tests read the setting inside the statement's
transaction, where the commit reads it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

from jobs import JobSpec, enqueue
from jobs.store.admission import Admission
from tests.factories import entry_for
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = [pytest.mark.django_db, pytest.mark.postgresql]


def _commit_waits_for_flush() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        (value,) = cursor.fetchone()
    return bool(value != "off")


def test_a_claim_commits_without_waiting_for_the_wal_flush(store):
    queue("a")
    with transaction.atomic():
        assert len(store.claim(Admission(T0, {KIND: LEASE}, 1))) == 1
        assert not _commit_waits_for_flush()


def test_a_settle_and_claim_commits_without_waiting_for_the_wal_flush(store):
    queue("a")
    queue("b")
    (claim,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    with transaction.atomic():
        won, claims = store.settle_and_claim([(claim.job, None)], Admission(T0, {KIND: LEASE}, 1))
        assert won == {claim.job.id}
        assert len(claims) == 1
        assert not _commit_waits_for_flush()


def test_a_batch_settle_commits_without_waiting_for_the_wal_flush(store):
    queue("a")
    (claim,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    with transaction.atomic():
        assert store.complete_many([(claim.job, None)], T0) == {claim.job.id}
        assert not _commit_waits_for_flush()


@pytest.mark.django_db(transaction=True)  # each claim its own transaction, as in a runner
def test_an_enqueue_a_retry_and_a_retirement_still_wait_for_the_wal_flush(store):
    queue("a")
    queue("b")
    first, second = store.claim(Admission(T0, {KIND: LEASE}, 2))
    with transaction.atomic():
        assert enqueue(JobSpec.now(KIND, "c"))
        assert _commit_waits_for_flush(), "an enqueue"
    with transaction.atomic():
        assert store.retry(
            first.job, T0, T0 + timedelta(minutes=1), "again", entry_for(first.job, "again")
        )
        assert _commit_waits_for_flush(), "a retry"
    with transaction.atomic():
        assert store.retire(second.job, T0, "out of attempts", entry_for(second.job, "out"))
        assert _commit_waits_for_flush(), "a retirement"
