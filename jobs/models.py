"""The `Job` row: the schedule, the attempt count and the lease, all in one place.

A job is live (`queued`, `running`) while it holds its `(kind, key)` identity
and settled (`done`, `failed`, `cancelled`) once it has released it. Rows are
written only through `jobs.queue` and `jobs.store`, which keep the rules.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from jobs.spec import KEY_MAX_LENGTH, KIND_MAX_LENGTH


class State(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


LIVE_STATES = (State.QUEUED, State.RUNNING)
SETTLED_STATES = (State.DONE, State.FAILED, State.CANCELLED)
_LIVE = Q(state__in=[s.value for s in LIVE_STATES])
_SETTLED = Q(state__in=[s.value for s in SETTLED_STATES])


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=KIND_MAX_LENGTH, help_text="Which handler runs it.")
    key = models.CharField(
        max_length=KEY_MAX_LENGTH,
        help_text="The identity of the work within its kind; held while the job is live.",
    )
    payload = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    attempts = models.PositiveIntegerField(
        default=0, help_text="Attempts claimed so far; counted at claim."
    )
    max_attempts = models.PositiveIntegerField(
        help_text="The attempt budget, frozen onto the row when it was queued."
    )
    run_at = models.DateTimeField(help_text="Not before this instant.")
    deadline = models.DateTimeField(
        null=True, blank=True, help_text="No retry is scheduled past this instant."
    )
    lease_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="While running: when another runner may take the row.",
    )
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One live job per identity; settled rows release it.
            models.UniqueConstraint(
                fields=["kind", "key"], condition=_LIVE, name="jobs_job_live_identity"
            ),
        ]
        indexes = [
            # Finding ready work: only live rows, in run_at order. A running
            # row's run_at is always in the past, so one range on run_at
            # serves both fresh work and expired leases, and a million
            # settled rows never enter the index.
            models.Index(fields=["run_at"], condition=_LIVE, name="jobs_job_ready"),
            # The retention sweep: settled rows by age.
            models.Index(fields=["finished_at"], condition=_SETTLED, name="jobs_job_settled"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.key} ({self.state})"

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_STATES
