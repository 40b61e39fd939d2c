"""The job list's actions on every job its filters match ("Select all N jobs"), and
a dead-letter group's redrive: counted, confirmed with the number, then done in
batches (`jobs.bulk`).

Django's "select all" hands an action the whole filtered queryset; loading
every id of it, as the actions do for a page's selection, would hold a
million ids in one request and write them in one transaction. So with "select
all" each action answers first with a page: "Retry 12,345 jobs matching state
failed, kind orders.relay?", with the jobs it would skip by state. Its Yes
posts the action back with `post=yes` and the moment of the count, and the
action then walks what was counted, a batch at a time, leaving rows that
changed since. More than `jobs.bulk.CAP` jobs are refused with a message:
narrow the filters, or use `manage.py jobs` with `--max`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.dateparse import parse_datetime

from jobs import bulk
from jobs.models import Job, JobsConfig, State
from jobs.presentation import cancelling_running

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: The changelist's own parameters, which say nothing about which jobs match.
_NOT_FILTERS = {"o", "p", "e", "_facets", "_popup", "_to_field", "_changelist_filters"}

#: The hidden fields the confirmation carries back: the count's moment and numbers.
COUNTED_AT = "bulk_counted_at"
COUNTED = "bulk_counted"


def across(request: HttpRequest) -> bool:
    """Whether an action was asked for every job the filters match."""
    return request.POST.get("select_across") == "1"


def matching(request: HttpRequest) -> str:
    """The list's filters and search, in words, for the confirmation and the log."""
    parts = [
        f"{name.split('__')[0] if name != 'q' else 'search'} {value}"
        for name, value in request.GET.items()
        if name not in _NOT_FILTERS
    ]
    return ", ".join(parts) or "every job"


def confirm_or_act(
    model_admin: ModelAdmin[Job],
    request: HttpRequest,
    selection: bulk.Selection,
    action: bulk.Action,
    *,
    fields: Mapping[str, str],
    max_attempts: int | None = None,
) -> HttpResponse | None:
    """The confirmation page, or, when it was posted back, the action done and
    reported in messages (None: Django goes back to the list).

    `fields` are the hidden fields that bring the POST back to this action
    (the list's `action`, a redrive's group).
    """
    if request.POST.get("post") != "yes":
        counted = bulk.count(selection, action)
        try:
            counted.within(bulk.CAP)
        except bulk.TooMany as error:
            model_admin.message_user(
                request,
                f"{error}: nothing was done (manage.py jobs {action.name.replace('_', '-')} "
                f"takes --max).",
                messages.ERROR,
            )
            return None
        return _page(model_admin, request, counted, fields, max_attempts)
    posted = _posted(request, action, selection.said)
    if posted is None:
        model_admin.message_user(request, "The confirmation was incomplete: nothing was done.")
        return None
    counted = posted
    outcome = bulk.act(
        selection, counted, by=request.user.get_username(), max_attempts=max_attempts
    )
    said = action.said.capitalize()
    level = messages.WARNING if outcome.skipped or outcome.changed else messages.SUCCESS
    model_admin.message_user(request, f"{said} ({counted.said}): {outcome}.", level)
    return None


def _page(
    model_admin: ModelAdmin[Job],
    request: HttpRequest,
    counted: bulk.Counted,
    fields: Mapping[str, str],
    max_attempts: int | None,
) -> TemplateResponse:
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": f"{counted.action.said.capitalize()} {counted.acting:,} jobs?",
        "opts": model_admin.opts,
        "counted": counted,
        "action": counted.action,
        "skipped": counted.skipped().most_common(),
        "running_note": _running_note(counted),
        "max_attempts": max_attempts,
        "redrive": "line" in fields,
        "fields": {
            **fields,
            "select_across": "1",
            COUNTED_AT: counted.at.isoformat(),
            COUNTED: json.dumps(counted.by_state),
        },
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "post_url": request.get_full_path(),
        "batch": bulk.BATCH,
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/jobs/job/bulk_confirmation.html", context)


def _running_note(counted: bulk.Counted) -> str:
    """For a cancel with running jobs among those counted, what it cannot do to them."""
    running = counted.by_state.get(State.RUNNING, 0)
    if counted.action is not bulk.CANCEL or not running:
        return ""
    return cancelling_running(running, JobsConfig.load().hard_kill_after)


def _posted(request: HttpRequest, action: bulk.Action, said: str) -> bulk.Counted | None:
    """The count the confirmation showed, as posted back; None if it is not there."""
    at: datetime | None = parse_datetime(request.POST.get(COUNTED_AT, ""))
    try:
        by_state = json.loads(request.POST.get(COUNTED, ""))
    except ValueError:
        return None
    if at is None or not isinstance(by_state, dict):
        return None
    counts = {str(state): int(n) for state, n in by_state.items() if isinstance(n, int)}
    return bulk.Counted(action, at, counts, said)
