"""The dashboard: the queue's numbers on one admin page, the one kept open in an incident.

`jobs.stats.collect` reads the numbers; this module turns them into rows and
words (`dashboard_context`) and the throughput chart into SVG geometry
(`throughput_chart`), so the template only lays them out and escapes them.
No JavaScript: the page reloads itself. It is served at the job list's
`dashboard/` (`jobs.admin.job.JobAdmin.get_urls`), to anyone who may view jobs.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from jobs.admin.runners import GONE_MEANS
from jobs.models import Job, State
from jobs.presentation import duration, relative
from jobs.stats import Stats, collect

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


def dashboard_page(model_admin: ModelAdmin[Job], request: HttpRequest) -> HttpResponse:
    """The page, for anyone with the job list's view permission."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    now = timezone.now()
    stats = collect(now=now)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Jobs dashboard",
        "opts": model_admin.opts,
        "stats": stats,
        "now": now,
        **dashboard_context(stats),
    }
    return TemplateResponse(request, "admin/jobs/dashboard.html", context)


def dashboard_context(stats: Stats) -> dict[str, Any]:
    """Everything the dashboard template shows, already in rows and words."""
    changelist = reverse("admin:jobs_job_changelist")
    states = [
        {
            "state": state.value,
            "count": stats.by_state.get(state.value, 0),
            "url": f"{changelist}?{urlencode({'state__exact': state.value})}",
        }
        for state in State
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
        {
            **row,
            "mean": duration(row["mean_seconds"], glance=True)
            if row["mean_seconds"] >= 60
            else None,
        }
        for row in stats.slowest_kinds
    ]
    # Live runners, then gone ones apart (`RunnerProcess.STALE_AFTER`); a
    # gone runner's running count is not counted.
    runners = [
        {
            "runner": runner,
            "gone": runner.gone,
            "heartbeat": relative(runner.heartbeat_at, stats.now, glance=True),
            "started": relative(runner.started_at, stats.now, glance=True),
        }
        for runner in sorted(stats.runners, key=lambda runner: runner.gone)
    ]
    return {
        "states": states,
        "live_kinds": _kinds(stats, changelist),
        "recent": recent,
        "lag": _wait(stats.lag_seconds),
        "unhandled": {
            "count": stats.unhandled,
            "wait": _wait(stats.unhandled_wait_seconds),
            "url": f"{changelist}?{urlencode({'handler': 'missing'})}",
        },
        "stuck_url": f"{changelist}?{urlencode({'stuck': 'yes'})}",
        "slowest": slowest,
        "runners": [row for row in runners if not row["gone"]],
        "gone_runners": [row for row in runners if row["gone"]],
        "gone_means": GONE_MEANS,
        # Processes, not lanes: a `runjobs --lanes 2` is one runner.
        "live_runners": len({runner.process for runner in stats.runners if not runner.gone}),
        "chart": throughput_chart(stats.throughput),
    }


def _wait(seconds: float) -> str | None:
    """A wait at a glance ("7 min"), or None under a second."""
    return duration(seconds, glance=True) if seconds >= 1 else None


def _kinds(stats: Stats, changelist: str) -> list[dict[str, Any]]:
    """Each kind with live rows or settles in the last hour: its live rows, its
    done and failed of the hour, and whether a live runner handles it."""
    handled = {kind for runner in stats.runners if not runner.gone for kind in runner.kinds}
    rows = []
    for kind in sorted({*stats.live_by_kind, *stats.kinds_last_hour}):
        live = stats.live_by_kind.get(kind, {})
        settled = stats.kinds_last_hour.get(kind, {})
        rows.append(
            {
                "kind": kind,
                "queued": live.get(State.QUEUED, 0),
                "running": live.get(State.RUNNING, 0),
                "done": settled.get("done", 0),
                "failed": settled.get("failed", 0),
                "handled": kind in handled,
                # Live rows nobody can run: the badge. A kind with none is only noted.
                "waiting": bool(live) and kind not in handled,
                "url": f"{changelist}?{urlencode({'kind': kind})}",
            }
        )
    return rows


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
