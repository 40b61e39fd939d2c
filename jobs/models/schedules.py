"""The `Schedule` row: one per declared schedule, written by the runners'
reconcile and by each occurrence's settle (`jobs.schedules`).

The settings declare a schedule; this row is what every runner agrees on
about it: its definition as last reconciled, the fire time its live
occurrence stands for (`due_at`, from which the next one is reckoned, so
retries and slow attempts never shift the schedule), how the last occurrence
ended, and whether an operator has disabled it.
"""

from __future__ import annotations

from django.db import models

#: A schedule's longest name: its job's key is "schedule:" and the name.
NAME_MAX_LENGTH = 246


class Schedule(models.Model):
    """One schedule, as the runners keep it."""

    name = models.CharField(primary_key=True, max_length=NAME_MAX_LENGTH)
    kind = models.CharField(max_length=100, help_text="The kind of its occurrences' jobs.")
    definition = models.JSONField(
        help_text="cron or every, timezone, missed, payload, queue and priority, as the "
        "settings said at the last runner's start."
    )
    enabled = models.BooleanField(
        default=True,
        help_text="Disabled: each occurrence is skipped at its claim, and the schedule moves "
        "on to its next fire time.",
    )
    changed_by = models.CharField(
        max_length=255, blank=True, help_text="Who last enabled or disabled it."
    )
    changed_at = models.DateTimeField(null=True, blank=True, help_text="When.")
    due_at = models.DateTimeField(
        null=True, blank=True, help_text="The fire time its live occurrence stands for."
    )
    last_fire_at = models.DateTimeField(
        null=True, blank=True, help_text="The fire time of the last occurrence that ended."
    )
    last_outcome = models.CharField(max_length=32, blank=True)
    last_job_id = models.UUIDField(null=True, blank=True)
    last_ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
