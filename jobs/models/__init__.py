"""The `Job` row (the schedule, the attempt count and the lease, all in one place),
the `JobsConfig` row (the live config, one row) and `RunnerProcess` (who is
running right now).

A job is live (`queued`, `running`, `waiting`) while it holds its `(kind, key)` identity
and settled (`done`, `failed`, `cancelled`) once it has released it. Job rows
are written only through `jobs.queue` and `jobs.store`, which keep the rules.

The identity is one mechanism on every database: `live` is a column the
database computes from `state` (TRUE while live, NULL once settled), and a plain
unique constraint covers `(kind, key, live)`. NULLs never collide, so settled
rows release the identity, and because the database derives `live` on every
write, no code path (a settle, a requeue, an operator's UPDATE) can forget to
take or release it. A partial unique index would say the same on PostgreSQL and
SQLite, but MySQL and MariaDB have none (Django drops the condition there).
"""

from __future__ import annotations

import dataclasses
import operator
import uuid
from collections.abc import Iterable
from functools import reduce
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Case, Q, Value, When

from jobs import config, history, history_actions
from jobs.models.runners import RUNNER_NAME_MAX_LENGTH
from jobs.spec import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    KEY_MAX_LENGTH,
    KIND_MAX_LENGTH,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_NAME_MAX_LENGTH,
)


class AttemptRecordField(models.JSONField):
    """`Job.errors`: a JSON list in Python, always, and SQL NULL for an empty one.

    An empty record is NULL so that adding the column writes nothing to the
    rows already there (SQLite adds a nullable column without a default in
    place, where Django would rebuild the table for any other), and a job
    whose attempts all end `Done`, most of them, stores nothing at all.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["null"] = True
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("null", None)
        return name, path, args, kwargs

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return []
        return super().from_db_value(value, expression, connection)

    def get_db_prep_save(self, value: Any, connection: Any) -> Any:
        if value == []:
            return None
        return super().get_db_prep_save(value, connection)


class State(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"
    #: A workflow's step whose dependencies have not all settled: live (it
    #: holds its identity), never claimed, spending no attempt.
    WAITING = "waiting", "waiting"


LIVE_STATES = (State.QUEUED, State.RUNNING, State.WAITING)
SETTLED_STATES = (State.DONE, State.FAILED, State.CANCELLED)


def one_of(states: Iterable[str]) -> Q:
    """`state` is one of `states`, written as equalities joined by OR, not
    IN: SQLite builds a temporary index for an IN list of more than two
    constants each time it evaluates one, and the generated `live` column and
    the state check are evaluated at every insert and every change of state."""
    return reduce(operator.or_, (Q(state=str(state)) for state in states))


_LIVE = one_of(LIVE_STATES)
#: Live and settled rows by the generated `live` column, which the partial
#: indexes' conditions read: a query filtering with these is one the planner
#: can answer from those indexes, which it cannot prove of a `state` filter.
LIVE_ROWS = Q(live=True)
SETTLED_ROWS = Q(live__isnull=True)


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
    queue = models.CharField(
        max_length=QUEUE_NAME_MAX_LENGTH,
        default=DEFAULT_QUEUE,
        db_default=DEFAULT_QUEUE,
        help_text="The queue it waits in; a runner serves the queues it is started with.",
    )
    priority = models.SmallIntegerField(
        default=DEFAULT_PRIORITY,
        db_default=DEFAULT_PRIORITY,
        validators=[MinValueValidator(PRIORITY_MIN), MaxValueValidator(PRIORITY_MAX)],
        help_text=f"{PRIORITY_MIN} to {PRIORITY_MAX}; higher runs first.",
    )
    lease_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="While running: when another runner may take the row.",
    )
    started_at = models.DateTimeField(
        null=True, blank=True, help_text="When the current or last attempt was claimed."
    )
    last_error = models.TextField(blank=True, default="")
    errors = AttemptRecordField(
        default=list,
        blank=True,
        editable=False,
        help_text=(
            "Each attempt that did not end done, oldest first: the last "
            f"{history.MAX_ENTRIES} (see jobs.history)."
        ),
    )
    # NULL (never claimed) rather than "": a nullable column without a default
    # is added in place on every database, with no rewrite of a large table.
    claimed_by = models.CharField(  # noqa: DJ001
        max_length=RUNNER_NAME_MAX_LENGTH,
        null=True,
        blank=True,
        editable=False,
        help_text=(
            "The runner that claimed the current or last attempt, as the runners page names it."
        ),
    )
    result = models.JSONField(
        null=True, blank=True, help_text="What the last attempt returned with Done, if anything."
    )
    # NULL unless the enqueue ran inside a span with `opentelemetry-api`
    # installed (`jobs.tracing`); nullable without a default, so the column is
    # added in place, as `claimed_by` was. 55 characters: version 00's length.
    traceparent = models.CharField(  # noqa: DJ001
        max_length=55,
        null=True,
        blank=True,
        editable=False,
        help_text=(
            "The W3C traceparent of the span that queued it, which each attempt's span "
            "links to; empty when it was queued outside a trace or without OpenTelemetry."
        ),
    )
    # NULL for a plain job; a claim reads it back, so the runner tells a
    # workflow's step from a plain job without a statement (`jobs.workflows`).
    workflow_id = models.UUIDField(
        null=True,
        blank=True,
        editable=False,
        help_text="The workflow this job is a step of; empty for a plain job.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # NULL unless the job was retired and its handler's `abandon` has not yet
    # been called: set in the retirement's own transaction, cleared by whoever
    # calls it (`jobs.retirement`), so a crash between the two leaves a debt
    # another process can see rather than a call nobody knows is missing.
    abandon_owed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Set when the job was retired and its handler's abandon is still to be "
        "called; cleared as the call is made (at most once).",
    )
    live = models.GeneratedField(
        expression=Case(When(_LIVE, then=Value(True)), default=None),
        output_field=models.BooleanField(null=True),
        db_persist=True,
        help_text="TRUE while the job is live, NULL once settled: the identity's holder.",
    )

    class Meta:
        constraints = [
            # One live job per identity; settled rows (live NULL) release it.
            models.UniqueConstraint(fields=["kind", "key", "live"], name="jobs_job_live_identity"),
            # A state written by hand must be one the code knows: an unknown
            # one would release the identity (`live` is NULL for it) and never
            # be claimed, settled or swept.
            models.CheckConstraint(condition=one_of(State), name="jobs_job_state_known"),
        ]
        indexes = [
            # Finding ready work: only live rows, by priority and run_at. The
            # claim walks the priorities present one index descent each, and
            # reads each one's ready rows (a running row's run_at is in the
            # past too) as one range on run_at, oldest first, so rows queued
            # for later are never read (`jobs.store`). Every column descends:
            # a descent to a priority lands on its newest rows, which are
            # live, not on the oldest, where a drain leaves the entries of
            # the rows it settled until vacuum clears them; the range is read
            # backwards, which gives claim order. A million settled rows
            # never enter the index.
            # The conditions read `live`, not `state`: a claim (queued to
            # running) then changes no indexed column, and PostgreSQL can
            # rewrite the row in place (a HOT update, see migration 0004)
            # instead of adding an entry to every index.
            models.Index(
                fields=["-priority", "-run_at", "-created_at"],
                condition=LIVE_ROWS,
                name="jobs_job_ready",
            ),
            # The retention sweep: settled rows by age.
            models.Index(fields=["finished_at"], condition=SETTLED_ROWS, name="jobs_job_settled"),
            # The admin's job list: newest first, and the bounds of its date
            # drill-down. Without it every page view sorts the whole table.
            # created_at only grows, so inserts append at the index's end.
            models.Index(fields=["created_at"], name="jobs_job_created"),
            # The `abandon` calls still owed, which every runner looks for
            # every few seconds (`jobs.runner.maintenance`): almost always
            # none, so on PostgreSQL and SQLite the index holds almost no
            # entry and the look reads none. Only a retirement and the claim
            # of its call write it; a claim of work changes no column of it.
            models.Index(
                fields=["abandon_owed_at"],
                condition=Q(abandon_owed_at__isnull=False),
                name="jobs_job_abandon_owed",
            ),
            # A workflow's steps (its page, its sweep, its repair). Partial on
            # PostgreSQL and SQLite, so a plain job adds no entry to it.
            models.Index(
                fields=["workflow_id"],
                condition=Q(workflow_id__isnull=False),
                name="jobs_job_workflow",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.key} ({self.state})"

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_STATES

    def dependency_results(self) -> dict[str, Any]:
        """In a workflow's step: {step name: result} of the steps it waits for
        directly that ended done (their `Done(result=...)`); {} for a plain job."""
        if self.workflow_id is None:
            return {}
        return dependency_results(Job.objects.using(self._state.db), self.id)

    @property
    def attempt_history(self) -> list[history.Entry]:
        """The attempt record (`errors`), read as entries, oldest first."""
        return history.entries(self.errors)

    @property
    def error_count(self) -> int:
        """How many attempts did not end done, those past the kept record
        included; an operator's actions in the record are not attempts."""
        return history_actions.not_done(self.errors)


def _config_field(name: str) -> models.PositiveIntegerField[Any, Any]:
    """The field of a declared key (`jobs.config.DECLARED`): its default, bounds and help."""
    key = config.DECLARATION[name]
    return models.PositiveIntegerField(
        default=key.default,
        validators=[MinValueValidator(key.low), MaxValueValidator(key.high)],
        help_text=key.help,
    )


class JobsConfig(models.Model):
    """The queue's live config: one row, edited in the admin, read by every runner.

    Created on first use from `settings.JOBS` / `JOBS_*` variables over the
    seed's defaults; from then on this row is the truth. Each field is a key
    declared in `jobs.config` (which says why each default is what it is);
    `jobs.live_config` says how the row is read.
    """

    SINGLETON_ID = 1

    poll_interval_ms = _config_field("poll_interval_ms")
    max_concurrent = _config_field("max_concurrent")
    max_attempts = _config_field("max_attempts")
    retry_base_seconds = _config_field("retry_base_seconds")
    retry_max_seconds = _config_field("retry_max_seconds")
    lease_seconds = _config_field("lease_seconds")
    retention_days = _config_field("retention_days")
    heartbeat_seconds = _config_field("heartbeat_seconds")
    hard_kill_after = _config_field("hard_kill_after")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "jobs config"
        verbose_name_plural = "jobs config"

    def __str__(self) -> str:
        return "jobs config"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = self.SINGLETON_ID
        super().save(*args, **kwargs)

    def clean(self) -> None:
        super().clean()
        base, ceiling = self.retry_base_seconds, self.retry_max_seconds
        if isinstance(base, int) and isinstance(ceiling, int) and base > ceiling:
            raise ValidationError(
                {
                    "retry_base_seconds": (
                        f"The first retry delay ({base} s) must not exceed "
                        f"the ceiling ({ceiling} s)."
                    )
                }
            )

    def as_settings(self) -> config.JobsSettings:
        return config.JobsSettings(**{name: getattr(self, name) for name in config.KEYS})

    @classmethod
    def load(cls, using: str | None = None) -> JobsConfig:
        """The row, created from `jobs.config.initial()` the first time it is asked for."""
        manager = cls.objects.using(using) if using else cls.objects
        row = manager.filter(pk=cls.SINGLETON_ID).first()
        if row is None:
            row, _ = manager.get_or_create(
                pk=cls.SINGLETON_ID, defaults=dataclasses.asdict(config.initial())
            )
        return row


from jobs.models.minutes import MinuteCount as MinuteCount  # noqa: E402
from jobs.models.routing import Control as Control  # noqa: E402
from jobs.models.routing import LimitedAttempt as LimitedAttempt  # noqa: E402
from jobs.models.runners import RunnerProcess as RunnerProcess  # noqa: E402
from jobs.models.runners import runner_name as runner_name  # noqa: E402
from jobs.models.schedules import Schedule as Schedule  # noqa: E402
from jobs.models.workflows import Dependency as Dependency  # noqa: E402
from jobs.models.workflows import Workflow as Workflow  # noqa: E402
from jobs.models.workflows import WorkflowStep as WorkflowStep  # noqa: E402
from jobs.models.workflows import dependency_results  # noqa: E402
