"""Asking before an action retires work, as Django's own bulk delete does.

Cancel cannot be undone in any way that matters: each handler's `abandon` runs
once and a running attempt's result is thrown away. So an action that retires
jobs (`Retiring`; today Cancel) first answers with a page listing what it
would touch and what it would skip, and writes only when that page is posted
back with `post=yes`. The page posts to the URL it came from, with the field
the action came in (`action` from the list, `CHANGE_FORM-action` from a job's
own page), so Django's action handling runs the action a second time; the
list's filters ride along in that URL for "select all". Where running jobs are
among them, it says what the cancel cannot do: stop their handlers
(`jobs.presentation.cancelling_running`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.admin import ActionLocation, helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from jobs.models import Job, JobsConfig, State
from jobs.presentation import cancelling_running

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

#: The most jobs listed in each part of the page; the rest are counted.
LISTED = 100

#: The field a job's own page posts its action in.
CHANGE_FORM_ACTION = f"{ActionLocation.CHANGE_FORM.value}-action"


@dataclass(frozen=True)
class Retiring:
    """An action that retires work, in the words its confirmation uses."""

    #: The action's name, as posted.
    action: str
    #: The verb on the button: "Yes, cancel".
    verb: str
    #: The states of the rows it acts on; the others are skipped.
    touches: tuple[str, ...]
    #: What happens to each row it touches.
    effect: str
    #: Why the others are skipped.
    skip_reason: str


CANCEL = Retiring(
    action="cancel",
    verb="cancel",
    # As `jobs.operations.cancel` retires them: a workflow's waiting step too.
    touches=(State.WAITING, State.QUEUED, State.RUNNING),
    effect=(
        "each is retired as cancelled and its handler's abandon runs once; "
        "a running attempt is not interrupted, but its result is discarded"
    ),
    skip_reason="already settled (done, failed or cancelled): nothing is written for them",
)


def confirmed(request: HttpRequest) -> bool:
    """Whether this POST is the confirmation page's "Yes"."""
    return request.POST.get("post") == "yes"


def confirmation_page(
    model_admin: ModelAdmin[Job], request: HttpRequest, queryset: QuerySet[Job], what: Retiring
) -> TemplateResponse:
    """The page that lists what `what` would touch and skip, and asks."""
    on_job_page = CHANGE_FORM_ACTION in request.POST
    select_across = not on_job_page and request.POST.get("select_across") == "1"
    selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
    touched = queryset.filter(state__in=what.touches)
    skipped = queryset.exclude(state__in=what.touches)
    running = touched.filter(state=State.RUNNING).count()
    note = running and cancelling_running(running, JobsConfig.load(queryset.db).hard_kill_after)
    found = 0 if select_across else queryset.count()
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": f"{what.verb.capitalize()} these jobs?",
        "opts": model_admin.opts,
        "what": what,
        "action_field": CHANGE_FORM_ACTION if on_job_page else "action",
        "selected": selected,
        "select_across": select_across,
        "touched": _rows(touched),
        "touched_count": touched.count(),
        "running_note": note or "",
        "skipped": _rows(skipped),
        "skipped_count": skipped.count(),
        "missing_count": 0 if select_across else max(len(set(selected)) - found, 0),
        "post_url": request.get_full_path(),
        "job": queryset.first() if on_job_page else None,
        "media": model_admin.media,
    }
    context["listed_more"] = {
        "touched": context["touched_count"] - len(context["touched"]),
        "skipped": context["skipped_count"] - len(context["skipped"]),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/jobs/job/retire_confirmation.html", context)


def _rows(queryset: QuerySet[Job]) -> list[dict[str, Any]]:
    """The first `LISTED` jobs of `queryset`, newest first, as the page lists them."""
    return [
        {
            "kind": job.kind,
            "key": job.key,
            "state": job.state,
            "prefix": job.id.hex[:8],
            "url": reverse("admin:jobs_job_change", args=[job.id]),
        }
        for job in queryset.order_by("-created_at")[:LISTED]
    ]
