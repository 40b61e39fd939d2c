"""A claim for a runner that serves some queues takes only their rows, expired
leases included, and leaves every other queue's rows as they were; a claim
naming no queue serves them all."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, queue, row

pytestmark = pytest.mark.django_db


def test_a_claim_for_some_queues_takes_only_their_ready_rows(store):
    emails = queue("e", queue="emails", run_at=T0 - timedelta(minutes=3))
    reports = queue("r", queue="reports", run_at=T0 - timedelta(minutes=2))
    other = queue("o", queue="default", run_at=T0 - timedelta(minutes=4))
    untouched = row(other)

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10, "runner-a", queues=["emails", "reports"]))

    assert [c.job.id for c in claims] == [emails.id, reports.id], "oldest first, only theirs"
    assert row(other) == untouched, "another queue's ready row is not touched at all"


def test_a_claim_for_some_queues_takes_back_an_expired_lease_only_in_them(store):
    mine = queue("mine", queue="emails")
    theirs = queue("theirs", queue="default")
    store.claim(Admission(T0, {KIND: LEASE}, 10, "gone"))
    after_expiry = T0 + LEASE + timedelta(seconds=1)

    claims = store.claim(Admission(after_expiry, {KIND: LEASE}, 10, "runner-a", queues=["emails"]))

    assert [c.job.id for c in claims] == [mine.id]
    assert row(theirs)["claimed_by"] == "gone", "the other queue's expired row waits for its runner"


def test_a_claim_naming_no_queue_takes_every_queues_rows(store):
    jobs = [
        queue(name, queue=name, run_at=T0 - timedelta(minutes=n)) for n, name in enumerate("abc")
    ]

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10, "runner-a"))

    assert {c.job.id for c in claims} == {job.id for job in jobs}


def test_settle_and_claim_for_some_queues_settles_any_done_row_and_claims_only_theirs(store):
    done = queue("done", queue="default")
    (attempt,) = store.claim(Admission(T0, {KIND: LEASE}, 1, "runner-a"))
    wanted = queue("wanted", queue="emails")
    queue("left", queue="default")

    won, claims = store.settle_and_claim(
        [(attempt.job, None)], Admission(T0, {KIND: LEASE}, 5, "runner-a", queues=["emails"])
    )

    assert won == {done.id}, "a Done settles whatever queue its row is in"
    assert [c.job.id for c in claims] == [wanted.id]
