"""The schedules page: every schedule, when it fires next, how its last
occurrence ended, and the operator's switch to disable it or run it now.

A schedule's row belongs to the runners: their start-up reconcile writes it
from `JOBS_SCHEDULES` and the handlers' `schedule`, and each occurrence's
settle moves it on (`jobs.schedules`). So the admin adds none, edits no field
and deletes none (a deleted row would be written again at the next runner's
start). The only changes are its actions: Disable and Enable go through
`jobs.schedules.operator.set_enabled`, as `manage.py jobs schedules` does,
stamped and logged with the admin user; Run now makes the live occurrence due
now through `jobs.operations.run_now`, so fencing stays the store's business.
The list asks once per page for the live occurrences and the last jobs that
still exist, not once per row.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs import operations
from jobs.admin.display import badge, pretty_json, stamp, stamp_or_nothing
from jobs.models import Job, Schedule
from jobs.presentation import NOTHING, relative
from jobs.schedules import operator
from jobs.schedules.operator import NoSuchSchedule

#: A name cut after each of the characters it may wrap at (`breakable`).
_PIECES = re.compile(r"[^./\-_:]*[./\-_:]|[^./\-_:]+")

#: The columns that read the page's live occurrences and last jobs (`_Page`).
_PAGE_COLUMNS = {"live_occurrence", "last_fire"}


#: A schedule's page, every line read-only.
_FIELDS = (
    "name",
    "kind",
    "expression",
    "in_words",
    "zone",
    "definition_shown",
    "enabled",
    "changed_by",
    "changed_when",
    "next_fire",
    "live_occurrence",
    "last_fire",
    "last_ended",
    "created",
)


class ScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Schedules as the runners keep them; read-only but for the actions.

    Rows are created, re-planned and removed by the runners' reconcile
    (`jobs.schedules.reconcile`), never here: a schedule is declared in the
    settings or on its handler. `jobs.change_schedule` allows the actions;
    `jobs.view_schedule` the list and each schedule's page.
    """

    list_display = [
        "schedule",
        "expression",
        "in_words",
        "zone",
        "next_fire",
        "last_fire",
        "enabled",
        "changed",
        "live_occurrence",
    ]
    list_display_links = ["schedule"]
    # No filter: a handful of rows, and its sidebar would take the width the
    # columns need at 1280 px.
    search_fields = ["name", "kind"]
    actions = ["disable_selected", "enable_selected", "run_now"]
    empty_value_display = NOTHING
    fields = _FIELDS
    readonly_fields = _FIELDS

    class Media:
        css = {"all": ["jobs/admin.css"]}

    # -- permissions ----------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the reconcile adds a row for each declared schedule

    def has_change_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        # `jobs.change_schedule` allows the actions; no row is edited by form
        # (a save would write back columns an occurrence's settle moves on).
        if obj is not None:
            return False
        return super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return False  # the reconcile removes a schedule no longer declared

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {"title": "Schedules", **(extra_context or {})})

    # -- columns --------------------------------------------------------------------

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        """The columns, those that need other rows sharing one read per page (`_Page`)."""
        page = _Page(self.get_queryset(request).db)

        def with_page(method: Callable[[Schedule, _Page | None], Any]) -> Callable[[Schedule], Any]:
            @functools.wraps(method)
            def column(row: Schedule) -> Any:
                return method(row, page)

            return column

        return [
            with_page(getattr(self, name)) if name in _PAGE_COLUMNS else name
            for name in super().get_list_display(request)
        ]

    @admin.display(description="name", ordering="name")
    def schedule(self, row: Schedule) -> SafeString:
        return breakable(row.name)

    @admin.display(description="expression")
    def expression(self, row: Schedule) -> SafeString:
        return format_html("<code>{}</code>", operator.describe(row)[0])

    @admin.display(description="in words")
    def in_words(self, row: Schedule) -> str:
        return operator.describe(row)[1]

    @admin.display(description="zone")
    def zone(self, row: Schedule) -> SafeString:
        return breakable(operator.describe(row)[2])

    @admin.display(description="next fire", ordering="due_at")
    def next_fire(self, row: Schedule) -> SafeString | str:
        return _when(row.due_at, row)

    @admin.display(description="last fire", ordering="last_fire_at")
    def last_fire(self, row: Schedule, page: _Page | None = None) -> SafeString | str:
        """When the last occurrence was due, and how it ended, linking to its job
        while the sweep has not removed it."""
        if not row.last_outcome:
            return _when(row.last_fire_at, row)
        outcome = badge(row.last_outcome, row.last_outcome)
        page = page or _Page(Schedule.objects.db)
        if row.last_job_id is not None and row.last_job_id in page.kept:
            url = reverse("admin:jobs_job_change", args=[row.last_job_id])
            outcome = format_html('<a href="{}">{}</a>', url, outcome)
        return format_html("{}<br>{}", _when(row.last_fire_at, row), outcome)

    @admin.display(description="changed", ordering="changed_at")
    def changed(self, row: Schedule) -> SafeString | str:
        if not row.changed_by:
            return NOTHING
        if row.changed_at is None:
            return row.changed_by
        return format_html(
            '{}<br><span class="jobs-when jobs-quiet" title="{}">{}</span>',
            row.changed_by,
            stamp(row.changed_at),
            relative(row.changed_at, timezone.now(), glance=True),
        )

    @admin.display(description="live occurrence")
    def live_occurrence(self, row: Schedule, page: _Page | None = None) -> SafeString | str:
        """The job standing for the next fire time: its state, linking to it."""
        job = (page or _Page(Schedule.objects.db)).live.get(row.name)
        if job is None:
            return NOTHING
        return format_html(
            '<a href="{}" title="{}">{}<br>{}</a>',
            reverse("admin:jobs_job_change", args=[job.id]),
            str(job.id),
            badge(job.state, job.state),
            str(job.id)[:8],
        )

    @admin.display(description="changed at")
    def changed_when(self, row: Schedule) -> str:
        return stamp_or_nothing(row.changed_at)

    @admin.display(description="last ended at")
    def last_ended(self, row: Schedule) -> str:
        return stamp_or_nothing(row.last_ended_at)

    @admin.display(description="created at")
    def created(self, row: Schedule) -> str:
        return stamp_or_nothing(row.created_at)

    @admin.display(description="definition")
    def definition_shown(self, row: Schedule) -> SafeString:
        return pretty_json(row.definition)

    # -- actions --------------------------------------------------------------------

    @admin.action(description="Disable the selected schedules", permissions=["change"])
    def disable_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        """From each runner's next claim of an occurrence, it is skipped to the next fire time."""
        self._set_enabled(request, queryset, enabled=False)

    @admin.action(description="Enable the selected schedules", permissions=["change"])
    def enable_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        """Resumes at the next fire time, with no catch-up runs for those skipped."""
        self._set_enabled(request, queryset, enabled=True)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[Schedule], *, enabled: bool
    ) -> None:
        by = f"admin:{request.user.get_username()}"
        done, gone = [], []
        for name in queryset.values_list("name", flat=True):
            try:
                done.append(operator.set_enabled(name, enabled, by=by, using=queryset.db).name)
            except NoSuchSchedule:  # removed by a runner's reconcile since the page was drawn
                gone.append(name)
        if done:
            said = (
                "Enabled: {}. Each resumes at its next fire time."
                if enabled
                else "Disabled: {}. From each runner's next claim, occurrences are skipped "
                "to the next fire time until enabled again."
            )
            self.message_user(request, said.format(", ".join(done)), messages.SUCCESS)
        if gone:
            self.message_user(
                request,
                f"No longer scheduled, nothing written: {', '.join(gone)}.",
                messages.WARNING,
            )

    @admin.action(description="Run now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        """Each selected schedule's queued occurrence becomes due now; its
        successor is due at the fire time it stood for."""
        live = _Page(queryset.db).live
        names = list(queryset.values_list("name", flat=True))
        ids: list[uuid.UUID] = [live[name].id for name in names if name in live]
        without = [name for name in names if name not in live]
        if ids:
            report = operations.run_now(
                ids, by=f"admin:{request.user.get_username()}", using=queryset.db
            )
            tone = messages.WARNING if report.skipped else messages.SUCCESS
            self.message_user(request, f"Run now: {report}.", tone)
        if without:
            self.message_user(
                request,
                f"Run now: no live occurrence for {', '.join(without)} (a runner's start "
                "queues one).",
                messages.WARNING,
            )


def _when(moment: datetime | None, row: Schedule | None = None) -> SafeString | str:
    """An instant to the second, with how far it is from now; the date and the
    time each kept on one line. A cron schedule's fire times are shown in its
    own zone, where its expression reads them (02:00 in Paris, not 01:00 UTC)."""
    if moment is None:
        return NOTHING
    if row is None:
        text = stamp(moment)
    else:
        text = f"{operator.local(moment, operator.describe(row)[2]):%Y-%m-%d %H:%M:%S %Z}"
    day, _, time = text.partition(" ")
    return format_html(
        '<span class="jobs-stamp">{}</span> <span class="jobs-stamp">{}</span><br>'
        '<span class="jobs-quiet">{}</span>',
        day,
        time,
        relative(moment, timezone.now(), glance=True),
    )


def breakable(text: str) -> SafeString:
    """`text`, escaped, free to wrap after each "." "/" "-" "_" or ":", so a long
    name or zone wraps within its column instead of widening the table."""
    return format_html_join("", "{}<wbr>", ((part,) for part in _PIECES.findall(text)))


class _Page:
    """What a page's columns read of other rows, each read once, when first asked."""

    def __init__(self, using: str) -> None:
        self.using = using

    @functools.cached_property
    def live(self) -> dict[str, Job]:
        """Each schedule's live occurrence, by schedule name (`operator.listing`)."""
        return {
            listed.row.name: listed.live_job
            for listed in operator.listing(self.using)
            if listed.live_job is not None
        }

    @functools.cached_property
    def kept(self) -> set[uuid.UUID]:
        """The schedules' last jobs that the retention sweep has not yet removed."""
        last = Schedule.objects.using(self.using).exclude(last_job_id=None).values("last_job_id")
        return set(Job.objects.using(self.using).filter(id__in=last).values_list("id", flat=True))
