"""The runners page: who is running right now, and who has gone silent.

Each `runjobs` process (each of its lanes) writes its own row and refreshes
it at every heartbeat; a row whose heartbeat is older than
`RunnerProcess.STALE_AFTER` is shown as gone. The children of a `runjobs
--processes` supervisor are listed together under its pid, host by host.
The admin only reads them, except to delete a gone one. A runner whose
machine's clock is off from the database's by more than
`jobs.clock.SKEW_SHOWN_ABOVE` says by how much under its last heartbeat: it
corrects its own time by it, but a machine drifting that far deserves a look.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.admin.display import badge
from jobs.clock import SKEW_SHOWN_ABOVE
from jobs.models import RunnerProcess
from jobs.presentation import NOTHING, relative


class RunnerProcessAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Runners as they last reported themselves; rows are written by the runners alone.

    Deleting is allowed: it clears a runner that died without a clean exit
    (a live runner would simply write its row again at its next heartbeat).
    """

    list_display = [
        "hostname",
        "pid_shown",
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
        "supervisor_pid",
        "pid",
        "version",
        "started_at",
        "heartbeat_at",
        "max_concurrent",
        "running",
        "kinds",
        "queues",
        "lane",
        "lanes",
        "clock_offset_ms",
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
    def last_heartbeat(self, runner: RunnerProcess) -> SafeString | str:
        """When it last reported itself, and under that its clock against the
        database's (`clock +25.0 s`: 25 s ahead) when they differ by more than
        `SKEW_SHOWN_ABOVE`; in this cell rather than a column of its own, which
        the page has no room for at 1280 px."""
        heard = relative(runner.heartbeat_at, timezone.now(), glance=True)
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
    def kinds_list(self, runner: RunnerProcess) -> str:
        kinds = ", ".join(str(kind) for kind in runner.kinds) or NOTHING
        if runner.queues:
            return f"{kinds} (queues: {', '.join(str(q) for q in runner.queues)})"
        return kinds

    @admin.display(description="status")
    def status(self, runner: RunnerProcess) -> SafeString:
        if runner.is_gone(timezone.now()):
            return badge("gone", "gone")
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
