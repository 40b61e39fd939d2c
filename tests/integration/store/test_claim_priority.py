"""The claim's order across priorities: highest priority first, then earliest
`run_at`, then the oldest row, on every database.

The claim walks the priorities live rows hold, one at a time, so these tests
put the rows that would fool such a walk in its way: rows of a higher
priority queued for later, of another kind or queue, running under a live
lease, or running under an expired one.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time

from jobs.models import Job, State
from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = pytest.mark.django_db

OTHER_KIND = "test.store.other"


def claimed_keys(claims) -> list[str]:
    return [claim.job.key for claim in claims]


def test_a_claim_takes_the_highest_priority_first_then_the_earliest_run_at(store):
    queue("low-old", priority=-5, run_at=T0 - timedelta(hours=1))
    queue("high-new", priority=50, run_at=T0 - timedelta(seconds=1))
    queue("mid-new", priority=0, run_at=T0 - timedelta(seconds=2))
    queue("high-old", priority=50, run_at=T0 - timedelta(minutes=1))
    queue("mid-old", priority=0, run_at=T0 - timedelta(minutes=2))

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10))

    assert claimed_keys(claims) == ["high-old", "high-new", "mid-old", "mid-new", "low-old"]


def test_a_claim_of_one_takes_a_later_queued_higher_priority_over_a_backlog(store):
    for n in range(20):
        queue(f"backlog{n}", priority=-10, run_at=T0 - timedelta(minutes=30 - n))
    queue("urgent", priority=10, run_at=T0)

    assert claimed_keys(store.claim(Admission(T0, {KIND: LEASE}, 1))) == ["urgent"]
    assert claimed_keys(store.claim(Admission(T0, {KIND: LEASE}, 1))) == ["backlog0"]


def test_among_equal_priority_and_run_at_the_oldest_row_is_claimed_first(store):
    with freeze_time(T0 - timedelta(minutes=3)):
        queue("created-first", run_at=T0 - timedelta(minutes=1))
    with freeze_time(T0 - timedelta(minutes=2)):
        queue("created-second", run_at=T0 - timedelta(minutes=1))

    assert claimed_keys(store.claim(Admission(T0, {KIND: LEASE}, 1))) == ["created-first"]


def test_higher_priority_rows_that_are_not_ready_do_not_hold_back_lower_ones(store):
    """Rows queued for later, of a kind this claim does not handle, or of a
    queue it does not serve, at priorities above the ready row: the claim
    passes each priority that has nothing for it."""
    for n in range(5):
        queue(f"later{n}", priority=100, run_at=T0 + timedelta(minutes=n + 1))
    queue("theirs", kind=OTHER_KIND, priority=90)
    queue("elsewhere", priority=80, queue="reports")
    queue("ready", priority=-100)

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10, queues=["default"]))

    assert claimed_keys(claims) == ["ready"]
    assert Job.objects.filter(state=State.QUEUED, attempts=0).count() == 7, "the others wait"


def test_a_claim_fills_its_limit_from_several_priorities_in_order(store):
    for priority in (30, 20, 10):
        for n in range(2):
            queue(f"p{priority}-{n}", priority=priority, run_at=T0 - timedelta(minutes=n))

    claims = store.claim(Admission(T0, {KIND: LEASE}, 5))

    assert claimed_keys(claims) == ["p30-1", "p30-0", "p20-1", "p20-0", "p10-1"]


def test_an_expired_lease_is_reclaimed_in_priority_order_with_the_queued_rows(store):
    queue("stale", priority=60, run_at=T0 - timedelta(minutes=10))
    queue("busy", priority=5, run_at=T0 - timedelta(minutes=10))
    (first,) = store.claim(Admission(T0 - timedelta(minutes=9), {KIND: timedelta(days=1)}, 1))
    assert first.job.key == "stale"
    (second,) = store.claim(Admission(T0 - timedelta(minutes=9), {KIND: LEASE}, 1))
    assert second.job.key == "busy"
    queue("queued-high", priority=10)
    queue("queued-low", priority=0)

    claims = store.claim(Admission(T0, {KIND: LEASE}, 10))

    # "busy"'s lease (5 minutes) expired; "stale"'s (a day) did not.
    assert claimed_keys(claims) == ["queued-high", "busy", "queued-low"]
    assert [claim.reclaimed for claim in claims] == [False, True, False]
