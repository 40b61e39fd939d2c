"""Prune: only settled rows that finished before the cutoff, at most a limit per call."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.models import Job, State
from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, queue, settled_row

pytestmark = pytest.mark.django_db


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
    claim_ids = {
        c.job.id for c in store.claim(Admission(before - timedelta(days=29), {KIND: LEASE}, 10))
    }
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
