"""The runners page: who is running right now, and who has gone silent.

Each `runjobs` process (each of its lanes) writes its own row and refreshes
it at every heartbeat (`RunnerProcess.HEARTBEAT`); a row that has missed
`RunnerProcess.MISSED_BEATS` of them (`STALE_AFTER`) is gone at once: listed
after every live runner, its running count not counted (it runs nothing
now), and forgotten `RunnerProcess.FORGET_AFTER` after its last heartbeat
(`jobs.runner.presence`). The children of a `runjobs --processes`
supervisor are listed together under its pid, host by host. The admin only
reads them, except to delete a gone one. A runner whose
machine's clock is off from the database's by more than
`jobs.clock.SKEW_SHOWN_ABOVE` says by how much under its last heartbeat: it
corrects its own time by it, but a machine drifting that far deserves a look.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin
from django.db.models import BooleanField, Case, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.admin.display import badge, breakable, stamp, time_field
from jobs.clock import SKEW_SHOWN_ABOVE
from jobs.models import RunnerProcess
from jobs.presentation import NOTHING, duration, relative

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldGroups
    from django.db.models.query import _OrderByFieldName
    from django.utils.datastructures import _ListOrTuple

#: Why a runner is gone, as the status column's tooltip says it.
GONE_MEANS = (
    f"no heartbeat for {duration(RunnerProcess.STALE_AFTER.total_seconds())}: "
    f"{RunnerProcess.MISSED_BEATS} missed heartbeats of "
    f"{duration(RunnerProcess.HEARTBEAT.total_seconds())}; it runs nothing now, and its row "
    f"is forgotten {duration(RunnerProcess.FORGET_AFTER.total_seconds())} after its last one"
)


class StatusFilter(admin.SimpleListFilter):
    """Live runners, or gone ones (`RunnerProcess.STALE_AFTER`)."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "live"), ("gone", "gone")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[RunnerProcess]
    ) -> QuerySet[RunnerProcess]:
        since = timezone.now() - RunnerProcess.STALE_AFTER
        if self.value() == "live":
            return queryset.filter(heartbeat_at__gte=since)
        if self.value() == "gone":
            return queryset.filter(heartbeat_at__lt=since)
        return queryset


class RunnerProcessAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Runners as they last reported themselves; rows are written by the runners alone.

    Deleting is allowed: it clears a runner that died without a clean exit
    (a live runner would simply write its row again at its next heartbeat).
    """

    list_display = [
        "status",
        "host",
        "pid_shown",
        "lane_shown",
        "version_shown",
        "started_at_shown",
        "last_heartbeat",
        "running_of",
        "kinds_list",
    ]
    list_filter = [StatusFilter]
    readonly_fields: ClassVar[list[str]] = [
        "hostname",
        "supervisor_pid",
        "pid",
        "version",
        "started_at_shown",
        "heartbeat_at_shown",
        "max_concurrent",
        "running",
        "kinds",
        "queues",
        "lane",
        "lanes",
        "clock_offset_ms",
    ]
    #: The page shows what the list does, each time as `stamp` says it (the
    #: raw time fields would be drawn in Django's own format beside them).
    fields: ClassVar[_FieldGroups | None] = list(readonly_fields)

    class Media:
        css = {"all": ["jobs/admin.css"]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: RunnerProcess | None = None) -> bool:
        return False

    started_at_shown = time_field(RunnerProcess, "started_at")
    heartbeat_at_shown = time_field(RunnerProcess, "heartbeat_at")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {"title": "Runners", **(extra_context or {})})

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunnerProcess]:
        """Live runners first, then the gone ones: apart, never mixed by host."""
        since = timezone.now() - RunnerProcess.STALE_AFTER
        gone = Case(
            When(heartbeat_at__lt=since, then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        )
        # As `ModelAdmin.get_queryset`, annotated before it is ordered by it.
        rows = RunnerProcess.objects.annotate(gone=gone)
        return rows.order_by(*self.get_ordering(request))

    def get_ordering(self, request: HttpRequest) -> _ListOrTuple[_OrderByFieldName]:
        return ["gone", *(RunnerProcess._meta.ordering or [])]

    @admin.display(description="host", ordering="hostname")
    def host(self, runner: RunnerProcess) -> SafeString:
        return breakable(runner.hostname)

    @admin.display(description="version", ordering="version")
    def version_shown(self, runner: RunnerProcess) -> SafeString:
        return breakable(runner.version)

    @admin.display(description="running")
    def running_of(self, runner: RunnerProcess) -> SafeString | str:
        """Its attempts running of its slots ("1 / 8"); for a gone runner none,
        and not counted: what it last said is history, not work under way."""
        if not runner.is_gone(timezone.now()):
            return f"{runner.running} / {runner.max_concurrent}"
        return format_html(
            '<span class="jobs-quiet" title="{}">0, not counted</span>',
            f"gone: it last said {runner.running} of {runner.max_concurrent} running",
        )

    @admin.display(description="last heartbeat", ordering="heartbeat_at")
    def last_heartbeat(self, runner: RunnerProcess) -> SafeString | str:
        """When it last reported itself, and under that its clock against the
        database's (`clock +25.0 s`: 25 s ahead) when they differ by more than
        `SKEW_SHOWN_ABOVE`; in this cell rather than a column of its own, which
        the page has no room for at 1280 px."""
        heard = format_html(
            '<span class="jobs-when" title="{}">{}</span>',
            stamp(runner.heartbeat_at),
            relative(runner.heartbeat_at, timezone.now(), glance=True),
        )
        skew = skew_shown(runner.clock_offset_ms)
        return format_html("{}<br>{}", heard, skew) if skew else heard

    @admin.display(description="pid", ordering="pid")
    def pid_shown(self, runner: RunnerProcess) -> SafeString | str:
        """Its pid, and under it the pid of the `runjobs --processes` supervisor
        that started it (the rows are ordered host, supervisor, pid, so a
        supervisor's children sit together); nothing more for a runner on its own."""
        if runner.supervisor_pid is None:
            return str(runner.pid)
        return format_html(
            '{}<br><span class="jobs-quiet jobs-supervisor">supervisor {}</span>',
            runner.pid,
            runner.supervisor_pid,
        )

    @admin.display(description="lane", ordering="lane")
    def lane_shown(self, runner: RunnerProcess) -> str:
        return runner.lane_label or NOTHING

    @admin.display(description="kinds")
    def kinds_list(self, runner: RunnerProcess) -> SafeString:
        kinds = ", ".join(str(kind) for kind in runner.kinds) or NOTHING
        if runner.queues:
            kinds = f"{kinds} (queues: {', '.join(str(q) for q in runner.queues)})"
        return breakable(kinds)

    @admin.display(description="status")
    def status(self, runner: RunnerProcess) -> SafeString:
        if runner.is_gone(timezone.now()):
            return format_html('<span title="{}">{}</span>', GONE_MEANS, badge("gone", "gone"))
        return badge("live", "live")


def skew_shown(offset_ms: int | None) -> SafeString | str:
    """A runner's clock skew as the runners page shows it, from its row's
    `clock_offset_ms` (the database's lead over the runner, so a runner ahead
    reads negative there and `+` here); '' within `SKEW_SHOWN_ABOVE`."""
    if offset_ms is None or abs(offset_ms) <= SKEW_SHOWN_ABOVE / timedelta(milliseconds=1):
        return ""
    ahead = -offset_ms / 1000
    side = "ahead of" if ahead > 0 else "behind"
    return format_html(
        '<span class="jobs-clock-skew" title="{}">clock {}</span>',
        f"this runner's clock is {abs(ahead):.1f} s {side} the database's; "
        "it corrects its own time by that",
        f"{ahead:+.1f} s",
    )
