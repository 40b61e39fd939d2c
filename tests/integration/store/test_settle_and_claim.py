"""`settle_and_claim`, the runner's pass: the finished attempts settled and fresh rows
claimed in one go, never a row a newer claim holds nor one the pass is settling."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import State
from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, queue, row

pytestmark = pytest.mark.django_db


def test_a_batch_settle_keeps_each_result_exactly_whatever_characters_it_holds(store):
    """The batch settles pass results through text the store writes itself."""
    for n in range(3):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=10 - n))
    claims = store.claim(Admission(T0, {KIND: LEASE}, 3))
    results = [
        {"text": 'a "quoted" word, a \\ backslash and {braces}', "n": [1, None, {"x": True}]},
        None,
        {"unicode": "caf\u00e9 \u2603", "comma,key": "NULL"},
    ]
    later = T0 + timedelta(seconds=1)

    won, _ = store.settle_and_claim(
        [(c.job, result) for c, result in zip(claims, results, strict=True)],
        Admission(later, {KIND: LEASE}, 1),
    )

    assert won == {c.job.id for c in claims}
    assert [row(c.job)["result"] for c in claims] == results, "each result as it was returned"


def test_settle_and_claim_settles_the_done_rows_and_claims_fresh_ones_in_one_go(store):
    for n in range(4):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=10 - n))
    first = store.claim(Admission(T0, {KIND: LEASE}, 2))
    later = T0 + timedelta(seconds=1)

    won, claims = store.settle_and_claim(
        [(c.job, {"n": i}) for i, c in enumerate(first)], Admission(later, {KIND: LEASE}, 2)
    )

    assert won == {c.job.id for c in first}, "both attempts settled"
    for i, c in enumerate(first):
        settled = row(c.job)
        assert (settled["state"], settled["result"]) == (State.DONE, {"n": i})
    assert {c.job.key for c in claims} == {"k2", "k3"}, "the pass went on to claim the rest"
    assert all(row(c.job)["state"] == State.RUNNING for c in claims)


def test_settle_and_claim_never_settles_a_row_a_newer_claim_holds(store):
    queue("k")
    (stale,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    after_expiry = T0 + LEASE + timedelta(seconds=1)
    (newer,) = store.claim(Admission(after_expiry, {KIND: LEASE}, 1))

    won, claims = store.settle_and_claim(
        [(stale.job, None)], Admission(after_expiry, {KIND: LEASE}, 1)
    )

    assert won == set(), "the stale attempt lost its row and wrote nothing"
    assert claims == [], "the row is held by the newer claim's live lease"
    assert row(newer.job)["state"] == State.RUNNING
    assert row(newer.job)["attempts"] == 2


@pytest.mark.parametrize("owner_first", [True, False], ids=["owner first", "stale first"])
def test_a_batch_holding_a_stale_attempt_and_the_owner_of_one_row_settles_it_with_the_owners_result(
    store, owner_first
):
    """Both attempts of one job can end Done before their runner's next pass: the
    one whose claim expired and the one that took the row over. Whatever their
    order in the batch, the owner settles the row and its result is the one kept."""
    queue("k")
    (stale,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    after_expiry = T0 + LEASE + timedelta(seconds=1)
    (owner,) = store.claim(Admission(after_expiry, {KIND: LEASE}, 1))
    batch = [(owner.job, {"by": "owner"}), (stale.job, {"by": "stale"})]

    won, _ = store.settle_and_claim(
        batch if owner_first else batch[::-1], Admission(after_expiry, {KIND: LEASE}, 1)
    )

    assert won == {owner.job.id}
    settled = row(owner.job)
    assert (settled["state"], settled["attempts"], settled["result"]) == (
        State.DONE,
        2,
        {"by": "owner"},
    )


def test_settle_and_claim_does_not_claim_a_row_it_is_settling(store):
    """A row whose lease has run out is ready again; the same pass must not both
    settle it and hand it out as a fresh claim."""
    queue("k")
    (attempt,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    after_expiry = T0 + LEASE + timedelta(seconds=1)

    won, claims = store.settle_and_claim(
        [(attempt.job, None)], Admission(after_expiry, {KIND: LEASE}, 5)
    )

    assert won == {attempt.job.id}, "the attempt still owned its row and settled it"
    assert claims == [], "and the row was not claimed again in the same pass"
    assert row(attempt.job)["state"] == State.DONE


@pytest.mark.django_db(transaction=True)
def test_a_pass_is_one_transaction_with_no_savepoint_inside_it(store):
    for n in range(2):
        queue(f"k{n}", run_at=T0 - timedelta(minutes=10 - n))
    (first,) = store.claim(Admission(T0, {KIND: LEASE}, 1))

    with CaptureQueriesContext(connection) as captured:
        won, (second,) = store.settle_and_claim(
            [(first.job, None)], Admission(T0, {KIND: LEASE}, 1)
        )

    assert (won, second.job.key) == ({first.job.id}, "k1")
    assert not [q["sql"] for q in captured.captured_queries if "SAVEPOINT" in q["sql"].upper()]
