"""The dashboard: the queue's numbers on one admin page, the one kept open in an incident.

`jobs.stats.collect` reads the numbers; this module turns them into rows and
words (`dashboard_context`), and `jobs.admin.charts` the per-minute counts
into SVG geometry, so the template only lays them out and escapes them.
No JavaScript: the page reloads itself. It is served at the job list's
`dashboard/` (`jobs.admin.job.JobAdmin.get_urls`), to anyone who may view jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from jobs.admin.charts import queue_charts
from jobs.admin.runners import GONE_MEANS
from jobs.models import Job, State
from jobs.presentation import duration, relative
from jobs.stats import Stats, collect
from jobs.waiting import NOUNS, REASONS, RUN_AT

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
        "waiting": _waiting(stats),
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
        "queue_charts": queue_charts(stats.per_minute),
    }


def _wait(seconds: float) -> str | None:
    """A wait at a glance ("7 min"), or None under a second."""
    return duration(seconds, glance=True) if seconds >= 1 else None


def _waiting(stats: Stats) -> list[dict[str, Any]]:
    """The queued jobs by what holds them (`jobs.waiting`), each reason that
    holds any, in the order they are counted."""
    return [
        {
            "reason": reason,
            "noun": NOUNS[reason],
            "jobs": int(stats.waiting[reason]["jobs"]),
            "oldest": None if reason == RUN_AT else _wait(stats.waiting[reason]["oldest_seconds"]),
        }
        for reason in REASONS
        if stats.waiting.get(reason, {}).get("jobs")
    ]


def _kinds(stats: Stats, changelist: str) -> list[dict[str, Any]]:
    """Each kind with live rows or settles in the last hour: its live rows, its
    done and failed of the hour, whether a live runner handles it, and the
    queues of its live jobs that no live runner serves it in."""
    handled = {kind for runner in stats.runners if not runner.gone for kind in runner.kinds}
    unserved: dict[str, list[str]] = {}
    for kind, queue in stats.unserved:
        unserved.setdefault(kind, []).append(queue)
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
                "unserved_queues": unserved.get(kind, []) if kind in handled else [],
                # Live rows nobody can run: the badge. A kind with none is only noted.
                "waiting": bool(live) and kind not in handled,
                "url": f"{changelist}?{urlencode({'kind': kind})}",
            }
        )
    return rows
