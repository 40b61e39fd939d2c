"""The job list's filters, each answered without reading the table's history.

Django's own filter on a field lists its choices with a DISTINCT over every
row, a full scan of a million settled jobs on each page view. The kind
filter's choices come from the handlers, the runners and the live rows; the
others offer one fixed choice and narrow by an indexed condition.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from jobs.holding import Holders
from jobs.models import LIVE_STATES, Job, RunnerProcess, State, Workflow
from jobs.registry import registry
from jobs.spec import DEFAULT_QUEUE
from jobs.stats import served_by_live_runners

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


class _ColumnFilter(admin.SimpleListFilter):
    """By one column's value. The choices are what `known` names plus the
    values live rows hold, never a DISTINCT over the whole history (a full
    scan of a million rows on every page view)."""

    parameter_name: str  # the column's name too

    def known(self) -> set[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        values = self.known()
        live = Job.objects.filter(state__in=LIVE_STATES).values_list(self.parameter_name, flat=True)
        values.update(live.distinct().order_by())
        if self.value():
            values.add(str(self.value()))
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(**{self.parameter_name: self.value()})
        return queryset


class KindFilter(_ColumnFilter):
    """By kind: the handlers this process knows, the runners' kinds, the live rows'."""

    title = "kind"
    parameter_name = "kind"

    def known(self) -> set[str]:
        kinds = set(registry.kinds())
        for runner_kinds in RunnerProcess.objects.values_list("kinds", flat=True):
            kinds.update(str(kind) for kind in runner_kinds)
        return kinds


class QueueFilter(_ColumnFilter):
    """By queue: the default one, the handlers' own, the live rows'."""

    title = "queue"
    parameter_name = "queue"

    def known(self) -> set[str]:
        return {DEFAULT_QUEUE, *(handler.queue for handler in registry)}


class _OneChoiceFilter(admin.SimpleListFilter):
    """A filter with one choice beside "All"."""

    choice: tuple[str, str]

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [self.choice]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == self.choice[0]:
            return self.narrow(queryset)
        return queryset

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        raise NotImplementedError


class HasErrorFilter(_OneChoiceFilter):
    """Rows with a `last_error`: failed and retrying attempts, and cancellations."""

    title = "error"
    parameter_name = "has_error"
    choice = ("yes", "has an error")

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.exclude(last_error="")


class LeaseExpiredFilter(_OneChoiceFilter):
    """Running rows whose claim has run out: their runner died or stalled, and
    the next claim by any runner will take them over."""

    title = "lease"
    parameter_name = "lease"
    choice = ("expired", "expired")

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(state=State.RUNNING, lease_expires_at__lt=timezone.now())


class WaitingForHandlerFilter(_OneChoiceFilter):
    """Live rows no live runner would claim (no handler for the kind, or not
    serving the queue): nothing runs them until such a runner starts."""

    title = "handler"
    parameter_name = "handler"
    choice = ("missing", "waiting for a handler")

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(state__in=LIVE_STATES).exclude(served_by_live_runners())


class StuckFilter(_OneChoiceFilter):
    """Running rows nobody is working on (`jobs.holding`): their runner has
    stopped reporting, or their lease has run out. The dashboard's "stuck"
    figure counts these."""

    title = "stuck"
    parameter_name = "stuck"
    choice = ("yes", "stuck: runner gone or lease expired")

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(Holders.read(queryset.db, timezone.now()).stuck_rows())


class WorkflowFilter(admin.SimpleListFilter):
    """By workflow: the steps of any workflow (the partial index on
    `workflow_id` holds no plain job), or of the one `?workflow_id=` names,
    which a workflow's page links to."""

    title = "workflow"
    parameter_name = "workflow_id"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        choices = [("any", "in a workflow")]
        value = self.value()
        if value and value != "any":
            choices.append((value, _workflow_name(value)))
        return choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "any":
            return queryset.filter(workflow_id__isnull=False)
        if value:
            return queryset.filter(workflow_id=value)
        return queryset


def _workflow_name(value: str) -> str:
    """The workflow's name, for its filter choice; its id's start if it has none."""
    try:
        ident = uuid.UUID(value)
    except ValueError:
        return value
    name = Workflow.objects.filter(id=ident).values_list("name", flat=True).first()
    return name or f"{ident.hex[:8]} (gone)"
