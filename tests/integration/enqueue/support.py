"""What the enqueue tests share: a fixed instant, and an enqueue that is rolled back."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction

from jobs import JobSpec, enqueue

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Rollback(Exception):
    """Raised inside atomic() to roll the block back."""


def enqueue_then_roll_back(spec: JobSpec) -> None:
    """Enqueue `spec` inside atomic(), then roll the block back."""
    with transaction.atomic():
        assert enqueue(spec), "the job was queued inside the block"
        raise Rollback
