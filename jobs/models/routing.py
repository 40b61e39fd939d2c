"""The routing models: what a claim reads beside the jobs themselves.

`LimitedAttempt` counts the running attempts of kinds under a concurrency
limit; `Control` holds the operator's live controls (a paused queue or kind,
a kind's limit set without a deploy).
"""

from __future__ import annotations

from django.db import models


class LimitedAttempt(models.Model):
    """One attempt of a kind under a concurrency limit, written by the claim that
    started it: what the next claim of the kind counts (at most the limit's
    rows, never the kind's backlog). A row whose attempt has ended (settled,
    or its lease expired) is deleted by the next claim of its kind
    (`jobs.store.limits`); nothing else writes here.
    """

    job_id = models.UUIDField(primary_key=True)
    kind = models.CharField(max_length=100, db_index=True)
    attempts = models.IntegerField(help_text="The attempt it counts (the job's `attempts`).")
    lease_expires_at = models.DateTimeField(help_text="Counted until this, at most.")

    class Meta:
        verbose_name = "attempt under a concurrency limit"

    def __str__(self) -> str:
        return f"{self.kind} attempt {self.attempts} of {self.job_id}"


class Control(models.Model):
    """One live operator control: a queue or a kind paused, or a kind's
    concurrency limit set in the database (0 holds it), overriding its
    handler's `concurrency_limit` on every runner without a deploy.

    Read by every runner with the config row (so a change reaches each
    runner's next claim within the config re-read interval, and at once
    where saves wake runners: PostgreSQL, and SQLite's doorbell). A row
    edited by hand into something no control means is logged and ignored
    (`jobs.controls`). Pausing claims nothing new of the queue or kind:
    running attempts finish, queued jobs wait, enqueueing goes on.
    """

    class Scope(models.TextChoices):
        QUEUE = "queue"
        KIND = "kind"

    scope = models.CharField(max_length=10, choices=Scope.choices)
    name = models.CharField(max_length=100, help_text="The queue's name, or the kind.")
    paused = models.BooleanField(default=False, help_text="Claim nothing new of it.")
    concurrency_limit = models.IntegerField(
        null=True,
        blank=True,
        help_text="A kind's limit across every runner, in place of its handler's; "
        "0 holds its jobs; empty keeps the handler's.",
    )
    changed_by = models.CharField(max_length=255, blank=True, help_text="Who changed it last.")
    changed_at = models.DateTimeField(help_text="When it was changed last.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "name"], name="jobs_control_scope_name"),
        ]
        ordering = ["scope", "name"]

    def __str__(self) -> str:
        return f"{self.scope} {self.name}"
