"""Claims within each kind's concurrency limit (`jobs.store.limits`), on every
database: the count, what a claim takes instead, and the gate that makes two
claims at once see each other."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections

from jobs.models import Job, LimitedAttempt, State
from jobs.store import for_database, limits
from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = pytest.mark.django_db

OTHER = "test.store.other"
LEASES = {KIND: LEASE, OTHER: LEASE}


def claim(store, free=8, kind_limits=None, now=T0, done=()):
    admission = Admission(now, LEASES, free, "host:1", kind_limits=kind_limits or {KIND: 2})
    return limits.settle_and_claim(store, list(done), admission)


def keys(claims) -> list[str]:
    return [claim.job.key for claim in claims]


def test_a_claim_takes_no_more_of_a_limited_kind_than_its_limit_and_fills_up_with_others(store):
    for n in range(5):
        queue(f"limited{n}", run_at=T0 - timedelta(minutes=10 - n))
        queue(f"other{n}", kind=OTHER, run_at=T0 - timedelta(minutes=5 - n))

    _, claims = claim(store)

    assert keys(claims) == ["limited0", "limited1", *[f"other{n}" for n in range(5)]]
    assert LimitedAttempt.objects.count() == 2, "each limited attempt is counted"


def test_a_kind_at_its_limit_is_passed_over_for_lower_priorities_of_other_kinds(store):
    for n in range(3):
        queue(f"urgent{n}", priority=100, run_at=T0 - timedelta(minutes=n))
    queue("routine", kind=OTHER, priority=-100)

    _, first = claim(store, free=2)
    _, second = claim(store, free=8)

    assert keys(first) == ["urgent2", "urgent1"]
    assert keys(second) == ["routine"], "urgent0 waits for a slot of its kind"
    assert Job.objects.get(key="urgent0").attempts == 0


def test_an_attempt_that_ended_no_longer_counts(store):
    for n in range(3):
        queue(f"limited{n}", run_at=T0 - timedelta(minutes=10 - n))
    _, (first, second) = claim(store)

    assert store.complete(first.job, T0)
    _, claims = claim(store, now=T0 + timedelta(seconds=1))

    assert keys(claims) == ["limited2"], "the settled attempt's place is free"
    assert set(LimitedAttempt.objects.values_list("job_id", flat=True)) == {
        second.job.id,
        claims[0].job.id,
    }, "the ended attempt's row is gone"


def test_an_attempt_past_its_lease_no_longer_counts_and_its_row_is_reclaimed(store):
    for n in range(3):
        queue(f"limited{n}", run_at=T0 - timedelta(minutes=10 - n))
    claim(store)

    _, claims = claim(store, now=T0 + LEASE + timedelta(seconds=1))

    assert keys(claims) == ["limited0", "limited1"], "both expired, both taken again"
    assert [claim.reclaimed for claim in claims] == [True, True]
    assert LimitedAttempt.objects.count() == 2


def test_a_limit_of_zero_holds_every_job_of_the_kind(store):
    queue("held")
    queue("free", kind=OTHER)

    _, claims = claim(store, kind_limits={KIND: 0})

    assert keys(claims) == ["free"]
    assert Job.objects.get(key="held").state == State.QUEUED


def test_a_claim_settles_its_done_batch_even_when_every_kind_is_at_its_limit(store):
    queue("first")
    queue("second")
    _, (running,) = claim(store, kind_limits={KIND: 1})

    won, claims = claim(store, kind_limits={KIND: 0}, done=[(running.job, None)])

    assert won == {running.job.id}
    assert claims == []
    assert Job.objects.get(key="first").state == State.DONE


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's claims take turns on its one write lock"
)
def test_a_kind_whose_gate_another_claim_holds_is_left_out_without_waiting(store):
    """Another runner in the middle of claiming the kind holds its gate; this
    claim takes the other kinds and leaves that one for its next pass."""
    queue("limited")
    queue("free", kind=OTHER)
    holding, release = threading.Event(), threading.Event()

    def hold_the_gate() -> None:
        try:
            with for_database().gated([KIND]) as held:
                assert held == {KIND}
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_gate)
    holder.start()
    try:
        assert holding.wait(30)
        _, claims = claim(store)
    finally:
        release.set()
        holder.join(30)

    assert keys(claims) == ["free"]
    _, later = claim(store)
    assert keys(later) == ["limited"], "once the gate is free the kind is claimed"


def test_kinds_that_differ_only_in_case_are_limited_apart(store):
    """Kinds compare byte for byte everywhere (on MySQL by the migration's
    collation): "Test.Store"'s running attempt does not count towards
    "test.store"'s limit."""
    shouted = KIND.title()
    leases = {KIND: LEASE, shouted: LEASE}
    both = {KIND: 1, shouted: 1}
    queue("upper", kind=shouted)
    _, first = limits.settle_and_claim(store, [], Admission(T0, leases, 8, kind_limits=both))
    assert [claim.job.key for claim in first] == ["upper"]
    queue("lower")

    _, second = limits.settle_and_claim(store, [], Admission(T0, leases, 8, kind_limits=both))

    assert [claim.job.key for claim in second] == ["lower"]
    assert LimitedAttempt.objects.filter(kind=KIND).count() == 1
