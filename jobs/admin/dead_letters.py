"""The dead letters page: retired jobs grouped by kind and telling line
(`jobs.dead_letters`), with "Retry all in this group" (a redrive, counted and
confirmed like any bulk action, `jobs.admin.bulk`) and an optional new budget.

Seeing it takes the job list's view permission; a redrive takes its change
permission, as the list's Retry does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from jobs import bulk, config, dead_letters
from jobs.admin import bulk as bulk_admin
from jobs.models import Job

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: The most groups the page lists; `manage.py jobs dead --limit` shows more.
LISTED = 200


def dead_letters_page(model_admin: ModelAdmin[Job], request: HttpRequest) -> HttpResponse:
    """The groups (GET), or a group's redrive (POST)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    if request.method == "POST":
        return _redrive(model_admin, request)
    kind = request.GET.get("kind", "")
    found = dead_letters.groups(kinds=(kind,) if kind else (), using=Job.objects.db)
    low, high = config.BOUNDS["max_attempts"]
    rows = [{"group": group} for group in found[:LISTED]]
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": "Dead letters",
        "opts": model_admin.opts,
        "rows": rows,
        "more": max(len(found) - LISTED, 0),
        "kind": kind,
        "can_redrive": model_admin.has_change_permission(request),
        "attempts_low": low,
        "attempts_high": high,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/jobs/dead_letters.html", context)


def _redrive(model_admin: ModelAdmin[Job], request: HttpRequest) -> HttpResponse:
    """A group's "Retry all": asked with the count first, then done in batches."""
    if not model_admin.has_change_permission(request):
        raise PermissionDenied
    back = HttpResponseRedirect(request.get_full_path())
    kind, line = request.POST.get("kind", ""), request.POST.get("line", "")
    attempts_text = request.POST.get("attempts", "").strip()
    low, high = config.BOUNDS["max_attempts"]
    attempts = None
    if attempts_text:
        attempts = int(attempts_text) if attempts_text.isdigit() else None
        if attempts is None or not low <= attempts <= high:
            model_admin.message_user(
                request,
                f"Attempts must be a whole number from {low} to {high:,}, not "
                f"{attempts_text[:40]!r}: nothing was done.",
                messages.ERROR,
            )
            return back
    if not kind or not line:
        model_admin.message_user(request, "No group was given: nothing was done.", messages.ERROR)
        return back
    selection = dead_letters.selection(kind, line, Job.objects.db)
    fields = {"kind": kind, "line": line, "attempts": attempts_text}
    response = bulk_admin.confirm_or_act(
        model_admin, request, selection, bulk.RETRY, fields=fields, max_attempts=attempts
    )
    return response or back
