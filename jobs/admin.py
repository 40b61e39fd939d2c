"""The admin: a window onto the queue, built to be the screen kept open during an incident.

- Jobs: a list that stays fast on a million rows (newest first from the
  `created_at` index, no full COUNT per page view on PostgreSQL, no filter or
  date drill-down that scans history to list its choices), a
  read-only detail, and three actions (run now, retry, cancel) that go through
  `jobs.operations`, so identity, attempts and fencing stay the store's
  business. Nothing here writes a job row itself.
- Runners: who is running right now, and who has gone silent.
- The dashboard: the queue's numbers from `jobs.stats`, one page, no JavaScript.
- The live config: a singleton form. There is one config row; the admin offers
  no way to add a second or delete it, and the list page goes straight to the
  form. Invalid values are refused by the form (the model's validators and
  `clean`) and never saved.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from datetime import tzinfo as tzinfo_type
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Max, Min, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from jobs import operations
from jobs.models import LIVE_STATES, Job, JobsConfig, RunnerProcess, State
from jobs.operations import Report
from jobs.registry import registry
from jobs.stats import Stats, collect, kinds_without_runner
from jobs.store import for_database

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: Shown where a value does not apply (a settled job's next run).
NOTHING = "—"

#: Actions offered both on the list and on a job's own page.
EVERYWHERE = [admin.ActionLocation.CHANGE_LIST, admin.ActionLocation.CHANGE_FORM]


# -- small formatting helpers ---------------------------------------------------


def span(seconds: float) -> str:
    """A duration as an operator reads it at a glance: "45 s", "3 min", "2 h", "4 d"."""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def ago(moment: datetime, now: datetime) -> str:
    seconds = (now - moment).total_seconds()
    return f"in {span(seconds)}" if seconds < 0 else f"{span(seconds)} ago"


def describe_next_run(job: Job, now: datetime) -> tuple[str, str]:
    """When the job runs next, in words, and a CSS class saying whether it is late."""
    if job.state == State.QUEUED:
        wait = (job.run_at - now).total_seconds()
        if wait >= 1:
            return f"in {span(wait)}", "jobs-when"
        if wait > -1:
            return "due now", "jobs-when"
        return f"overdue {span(wait)}", "jobs-when jobs-late"
    if job.state == State.RUNNING:
        if job.lease_expires_at is None:
            return "running now", "jobs-when"
        left = (job.lease_expires_at - now).total_seconds()
        if left > 0:
            return f"lease ends in {span(left)}", "jobs-when"
        return f"lease expired {span(left)} ago", "jobs-when jobs-late"
    return NOTHING, "jobs-when"


def headline(error: str) -> str:
    """The line of an error that says what happened.

    A reason's first line; for a traceback its last (the exception itself),
    as the runner's logs do, since "Traceback (most recent call last):" says
    nothing.
    """
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def badge(word: str, tone: str) -> SafeString:
    return format_html('<span class="jobs-badge jobs-badge-{}">{}</span>', tone, word)


# -- the job list ---------------------------------------------------------------

#: Above this many rows (PostgreSQL's own estimate) an unfiltered job list
#: takes its count from the table statistics instead of counting every row.
ESTIMATE_COUNT_ABOVE = 100_000


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]  # generic only in the stubs
    """Counts exactly, except an unfiltered list of a large PostgreSQL table.

    Counting a million rows on every page view is what makes an admin list
    slow. With no filter, search or date drill-down applied, the count is the
    whole table, and PostgreSQL already keeps an estimate of that; a filtered
    list is smaller and is counted exactly. `estimated` tells the template to
    say "about".
    """

    estimated = False

    @cached_property
    def count(self) -> int:
        estimate = self._estimate()
        if estimate is not None:
            self.estimated = True
            return estimate
        return super().count

    def _estimate(self) -> int | None:
        rows = self.object_list
        if not isinstance(rows, QuerySet) or rows.query.where:
            return None
        estimate = for_database(rows.db).estimated_rows()
        if estimate is None or estimate < ESTIMATE_COUNT_ABOVE:
            return None
        return estimate


class CalendarQuerySet(QuerySet[Job]):
    """The job list's queryset, whose `datetimes()` reads two index entries, not every row.

    The admin's date drill-down asks for each year, month or day that holds a
    row: a DISTINCT over the whole table on every page view. This answers from
    the first and last `created_at` alone (the two ends of the
    `jobs_job_created` index) and offers every year, month or day between
    them; one with no jobs simply shows an empty list.
    """

    def datetimes(  # type: ignore[override]  # the drill-down only iterates the result
        self,
        field_name: str,
        kind: Literal["year", "month", "week", "day", "hour", "minute", "second"],
        order: Literal["ASC", "DESC"] = "ASC",
        tzinfo: tzinfo_type | None = None,
    ) -> Iterable[datetime]:
        if kind not in ("year", "month", "day") or not settings.USE_TZ:
            return super().datetimes(field_name, kind, order, tzinfo)
        zone = tzinfo or timezone.get_current_timezone()
        ends = self.aggregate(first=Min(field_name), last=Max(field_name))
        if ends["first"] is None:
            return []
        day: date = ends["first"].astimezone(zone).date()
        last: date = ends["last"].astimezone(zone).date()
        if kind == "year":
            day = day.replace(month=1, day=1)
        elif kind == "month":
            day = day.replace(day=1)
        found = []
        while day <= last:
            found.append(datetime.combine(day, time.min, tzinfo=zone))
            if kind == "day":
                day += timedelta(days=1)
            elif kind == "month":
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
            else:
                day = date(day.year + 1, 1, 1)
        return found[::-1] if order == "DESC" else found


class KindFilter(admin.SimpleListFilter):
    """By kind. The choices come from the handlers this process knows, the
    runners' kinds and the live rows' kinds, never from a DISTINCT over the
    whole history (a full scan of a million rows on every page view)."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: ModelAdmin[Any]) -> list[tuple[str, str]]:
        kinds = set(registry.kinds())
        for runner_kinds in RunnerProcess.objects.values_list("kinds", flat=True):
            kinds.update(str(kind) for kind in runner_kinds)
        live = Job.objects.filter(state__in=LIVE_STATES).values_list("kind", flat=True)
        kinds.update(live.distinct().order_by())
        if self.value():
            kinds.add(str(self.value()))
        return [(kind, kind) for kind in sorted(kinds)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(kind=self.value())
        return queryset


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
    """Live rows of a kind no live runner has a handler for: nothing will run
    them until a runner that knows the kind starts."""

    title = "handler"
    parameter_name = "handler"
    choice = ("missing", "waiting for a handler")

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(state__in=LIVE_STATES, kind__in=kinds_without_runner())


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    list_display = [
        "state_badge",
        "kind",
        "key",
        "attempts_of",
        "next_run",
        "error",
        "created",
    ]
    list_display_links = ["key"]
    list_filter = [
        "state",
        KindFilter,
        HasErrorFilter,
        LeaseExpiredFilter,
        WaitingForHandlerFilter,
    ]
    search_fields = ["key"]
    search_help_text = "A key (or part of one), or a job's id."
    ordering = ["-created_at"]
    date_hierarchy = "created_at"
    list_per_page = 50
    paginator = EstimatedCountPaginator
    # A second COUNT(*) of the whole table, on every filtered page view, just
    # to print "(of 1,000,000 total)": not worth it on a large table.
    show_full_result_count = False
    # Facet counts are one COUNT per filter choice; never on this table.
    show_facets = admin.ShowFacets.NEVER
    actions = ["run_now", "retry", "cancel"]
    empty_value_display = NOTHING

    fieldsets = [
        (
            "Job",
            {
                "fields": [
                    "id",
                    "kind",
                    "key",
                    "state_badge",
                    "created_at",
                    "updated_at",
                    "finished_at",
                ]
            },
        ),
        (
            "Schedule and attempts",
            {
                "fields": [
                    "run_at",
                    "next_run",
                    "deadline",
                    "attempts",
                    "max_attempts",
                    "started_at",
                    "lease_expires_at",
                ]
            },
        ),
        ("Payload", {"fields": ["payload_json"], "classes": ["jobs-span"]}),
        ("Last error", {"fields": ["last_error_text"], "classes": ["jobs-span"]}),
        ("Result", {"fields": ["result_json"], "classes": ["jobs-span"]}),
    ]
    readonly_fields = [
        "id",
        "kind",
        "key",
        "state_badge",
        "run_at",
        "next_run",
        "deadline",
        "attempts",
        "max_attempts",
        "started_at",
        "lease_expires_at",
        "payload_json",
        "last_error_text",
        "result_json",
        "created_at",
        "updated_at",
        "finished_at",
    ]

    class Media:
        css = {"all": ["jobs/admin.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        queryset = super().get_queryset(request)
        return CalendarQuerySet(model=Job, query=queryset.query.chain(), using=queryset.db)

    # -- permissions ------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Jobs are created by `enqueue`, which validates the spec and keeps the
        # live identity; a form could do neither.
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        # `jobs.change_job` is what allows the actions. No single row is ever
        # edited by form: saving one would write every column back, unfenced,
        # over whatever a runner wrote since the page was drawn. So a job's
        # page is read-only for everyone, and its state changes only through
        # the actions (`jobs.operations`).
        if obj is not None:
            return False
        return super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        # Not at all, not even for superusers. Deleting a live job would
        # retire it without calling its handler's `abandon`, breaking the
        # promise that a retired job is told exactly once; Cancel does it
        # properly. Settled rows leave through the retention sweep.
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {"title": "Jobs", **(extra_context or {})})

    # -- list columns -------------------------------------------------------------

    @admin.display(description="state", ordering="state")
    def state_badge(self, job: Job) -> SafeString:
        return badge(job.state, job.state)

    @admin.display(description="attempts")
    def attempts_of(self, job: Job) -> str:
        return f"{job.attempts} / {job.max_attempts}"

    @admin.display(description="next run", ordering="run_at")
    def next_run(self, job: Job) -> SafeString:
        words, css = describe_next_run(job, timezone.now())
        when = job.run_at if job.state == State.QUEUED else job.lease_expires_at
        title = _stamp(when) if when else ""
        return format_html('<span class="{}" title="{}">{}</span>', css, title, words)

    @admin.display(description="last error")
    def error(self, job: Job) -> SafeString | str:
        line = headline(job.last_error)
        if not line:
            return ""
        return format_html(
            '<span class="jobs-error-line" title="{}">{}</span>',
            Truncator(line).chars(500),
            Truncator(line).chars(80),
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, job: Job) -> SafeString:
        return format_html(
            '<span class="jobs-when" title="{}">{}</span>',
            _stamp(job.created_at),
            ago(job.created_at, timezone.now()),
        )

    # -- the detail ---------------------------------------------------------------

    @admin.display(description="payload")
    def payload_json(self, job: Job) -> SafeString:
        return _pretty_json(job.payload)

    @admin.display(description="result")
    def result_json(self, job: Job) -> SafeString | str:
        return NOTHING if job.result is None else _pretty_json(job.result)

    @admin.display(description="last error")
    def last_error_text(self, job: Job) -> SafeString | str:
        if not job.last_error:
            return NOTHING
        return format_html('<pre class="jobs-pre jobs-error-block">{}</pre>', job.last_error)

    # -- search -------------------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """By key, as usual; a term that parses as a UUID also finds the job with that id."""
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        try:
            job_id = uuid.UUID(search_term.strip())
        except ValueError:
            return found, may_have_duplicates
        return found | queryset.filter(id=job_id), may_have_duplicates

    # -- actions ------------------------------------------------------------------

    @admin.action(description="Run now", permissions=["change"], location=EVERYWHERE)
    def run_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        """Queued jobs become due now; runners in this process are woken."""
        report = operations.run_now(_ids(request, queryset))
        self._report(request, "Run now", report, "made due now")

    @admin.action(description="Retry", permissions=["change"], location=EVERYWHERE)
    def retry(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        """Failed or cancelled jobs are queued again, due now, with a fresh attempt budget."""
        report = operations.retry(_ids(request, queryset))
        self._report(request, "Retry", report, "queued again with a fresh attempt budget")

    @admin.action(description="Cancel", permissions=["change"], location=EVERYWHERE)
    def cancel(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        """Queued or running jobs are retired as cancelled; each handler's abandon runs once."""
        report = operations.cancel(_ids(request, queryset), by=request.user.get_username())
        self._report(request, "Cancel", report, "cancelled")

    def _report(self, request: HttpRequest, action: str, report: Report, done: str) -> None:
        if report.touched:
            self.message_user(
                request, f"{action}: {_jobs(report.touched)} {done}.", messages.SUCCESS
            )
        if report.skipped:
            reasons = "; ".join(f"{why} ({n})" for why, n in report.skipped.most_common())
            self.message_user(
                request,
                f"{action}: skipped {_jobs(report.skipped.total())}, nothing written for "
                f"{'it' if report.skipped.total() == 1 else 'them'}: {reasons}.",
                messages.WARNING,
            )
        if not report.touched and not report.skipped:
            self.message_user(request, f"{action}: no jobs selected.", messages.WARNING)

    # -- the dashboard ------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        dashboard = path(
            "dashboard/",
            self.admin_site.admin_view(self.dashboard_view),
            name="jobs_dashboard",
        )
        # Ahead of the model's own routes, whose `<path:object_id>/` would
        # otherwise take "dashboard/" for a job id.
        return [dashboard, *super().get_urls()]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        now = timezone.now()
        stats = collect(now=now)
        context = {
            **self.admin_site.each_context(request),
            "title": "Jobs dashboard",
            "opts": self.opts,
            "stats": stats,
            "now": now,
            **dashboard_context(stats, kinds_without_runner(now=now)),
        }
        return TemplateResponse(request, "admin/jobs/dashboard.html", context)


def _stamp(moment: datetime) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z}"


def _ids(request: HttpRequest, queryset: QuerySet[Job]) -> list[uuid.UUID]:
    """The jobs an action was asked to act on.

    The rows the queryset still finds, plus any selected row it no longer
    finds (deleted by the sweep since the page was drawn), so that the
    operation reports it as missing instead of it silently vanishing.
    """
    found = list(queryset.values_list("id", flat=True))
    if request.POST.get("select_across") == "1":
        return found
    known = set(found)
    for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
        try:
            selected = uuid.UUID(value)
        except ValueError:
            continue
        if selected not in known:
            known.add(selected)
            found.append(selected)
    return found


def _jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


# -- the dashboard's content ----------------------------------------------------


def dashboard_context(stats: Stats, waiting_kinds: Iterable[str]) -> dict[str, Any]:
    """Everything the dashboard template shows, already in rows and words."""
    changelist = reverse("admin:jobs_job_changelist")
    waiting = set(waiting_kinds)
    states = [
        {
            "state": state.value,
            "count": stats.by_state.get(state.value, 0),
            "url": f"{changelist}?{urlencode({'state__exact': state.value})}",
        }
        for state in State
    ]
    kinds = [
        {
            "kind": kind,
            "queued": counts.get(State.QUEUED, 0),
            "running": counts.get(State.RUNNING, 0),
            "waiting": kind in waiting,
            "url": f"{changelist}?{urlencode({'kind': kind})}",
        }
        for kind, counts in sorted(stats.live_by_kind.items())
    ]
    recent = [
        {
            "state": state,
            "last_5_minutes": stats.last_5_minutes.get(state, 0),
            "last_hour": stats.last_hour.get(state, 0),
        }
        for state in (State.DONE, State.FAILED, State.CANCELLED)
    ]
    slowest = [
        {**row, "mean": span(row["mean_seconds"]) if row["mean_seconds"] >= 60 else None}
        for row in stats.slowest_kinds
    ]
    runners = [
        {
            "runner": runner,
            "heartbeat": ago(runner.heartbeat_at, stats.now),
            "started": ago(runner.started_at, stats.now),
        }
        for runner in stats.runners
    ]
    return {
        "states": states,
        "live_kinds": kinds,
        "recent": recent,
        "lag": span(stats.lag_seconds) if stats.lag_seconds >= 1 else None,
        "slowest": slowest,
        "runners": runners,
        # Processes, not lanes: a `runjobs --lanes 2` is one runner.
        "live_runners": len({runner.process for runner in stats.runners if not runner.gone}),
        "chart": throughput_chart(stats.throughput),
    }


#: The chart's geometry, in SVG user units (it scales to the page's width).
CHART_LEFT, CHART_TOP, CHART_BAR, CHART_HEIGHT, CHART_BOTTOM = 44, 12, 10, 120, 28


def throughput_chart(throughput: list[tuple[datetime, int, int]]) -> dict[str, Any]:
    """Bars for done and failed per minute (failed stacked on done), as SVG geometry.

    The template draws it; nothing here is HTML, so everything is escaped there.
    """
    peak = max((done + failed for _, done, failed in throughput), default=0)
    scale = CHART_HEIGHT / peak if peak else 0.0
    base = CHART_TOP + CHART_HEIGHT
    bars = []
    for index, (minute, done, failed) in enumerate(throughput):
        x = CHART_LEFT + index * CHART_BAR
        done_height = round(done * scale, 1)
        failed_height = round(failed * scale, 1)
        bars.append(
            {
                "x": x + 1,
                "width": CHART_BAR - 2,
                "done_y": round(base - done_height, 1),
                "done_height": done_height,
                "failed_y": round(base - done_height - failed_height, 1),
                "failed_height": failed_height,
                "label": f"{timezone.localtime(minute):%H:%M}: {done} done, {failed} failed",
            }
        )
    right = CHART_LEFT + len(throughput) * CHART_BAR
    ticks = []
    if throughput:
        for index in (0, len(throughput) // 2, len(throughput) - 1):
            minute = throughput[index][0]
            ticks.append(
                {
                    "x": CHART_LEFT + index * CHART_BAR + CHART_BAR / 2,
                    "label": f"{timezone.localtime(minute):%H:%M}",
                }
            )
    return {
        "width": right + 8,
        "height": base + CHART_BOTTOM,
        "left": CHART_LEFT,
        "right": right,
        "top": CHART_TOP,
        "base": base,
        "plot_height": CHART_HEIGHT,
        "middle": CHART_TOP + CHART_HEIGHT / 2,
        "label_x": CHART_LEFT - 6,
        "tick_y": base + 16,
        "peak": peak,
        "half": f"{peak / 2:g}",
        "bars": bars,
        "ticks": ticks,
        "done": sum(done for _, done, _ in throughput),
        "failed": sum(failed for _, _, failed in throughput),
        "minutes": len(throughput),
    }


# -- runners --------------------------------------------------------------------


@admin.register(RunnerProcess)
class RunnerProcessAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Runners as they last reported themselves; rows are written by the runners alone.

    Deleting is allowed: it clears a runner that died without a clean exit
    (a live runner would simply write its row again at its next heartbeat).
    """

    list_display = [
        "hostname",
        "pid",
        "lane_shown",
        "version",
        "started_at",
        "last_heartbeat",
        "max_concurrent",
        "running",
        "kinds_list",
        "status",
    ]
    readonly_fields = [
        "hostname",
        "pid",
        "version",
        "started_at",
        "heartbeat_at",
        "max_concurrent",
        "running",
        "kinds",
        "lane",
        "lanes",
    ]

    class Media:
        css = {"all": ["jobs/admin.css"]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: RunnerProcess | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {"title": "Runners", **(extra_context or {})})

    @admin.display(description="last heartbeat", ordering="heartbeat_at")
    def last_heartbeat(self, runner: RunnerProcess) -> str:
        return ago(runner.heartbeat_at, timezone.now())

    @admin.display(description="lane", ordering="lane")
    def lane_shown(self, runner: RunnerProcess) -> str:
        return runner.lane_label or NOTHING

    @admin.display(description="kinds")
    def kinds_list(self, runner: RunnerProcess) -> str:
        return ", ".join(str(kind) for kind in runner.kinds) or NOTHING

    @admin.display(description="status")
    def status(self, runner: RunnerProcess) -> SafeString:
        if runner.is_gone(timezone.now()):
            return badge("gone", "gone")
        return badge("live", "live")


# -- the live config ------------------------------------------------------------


@admin.register(JobsConfig)
class JobsConfigAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    fieldsets = [
        ("Runner", {"fields": ["poll_interval_ms", "max_concurrent"]}),
        (
            "Attempts and retries",
            {
                "fields": [
                    "max_attempts",
                    "retry_base_seconds",
                    "retry_max_seconds",
                    "lease_seconds",
                ]
            },
        ),
        ("Retention", {"fields": ["retention_days"]}),
        ("Saved", {"fields": ["updated_at"]}),
    ]
    readonly_fields = ["updated_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: JobsConfig | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        row = JobsConfig.load()
        return HttpResponseRedirect(reverse("admin:jobs_jobsconfig_change", args=[row.pk]))


def _pretty_json(value: object) -> SafeString:
    """JSON indented for reading, escaped, in a monospace block."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return format_html('<pre class="jobs-pre">{}</pre>', text)
