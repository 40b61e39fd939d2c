"""A workflow's admin page: every step with its state and timing, the graph,
and Cancel behind a confirmation (issue 37).

The page reads the workflow through `jobs.workflows.operator.describe`, as
`manage.py jobs workflow show` does, so the screen and the command say the
same; `jobs.admin.workflow_graph` lays the graph out and the template draws
it as inline SVG. Cancel goes through `operator.cancel`, as `jobs workflow
cancel` does: every step not settled is cancelled, each handler's abandon
once. It is asked first, in the words the job list's Cancel uses
(`jobs.admin.confirm.CANCEL`, `jobs.presentation.cancelling_running`), and
only the confirmation's POST writes.

Served at the job list's `workflow/<id>/` (`jobs.admin.job.JobAdmin.get_urls`):
seeing it takes the job list's view permission, cancelling its change
permission, as the list's own actions do.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator

from jobs.admin import workflow_graph
from jobs.admin.confirm import CANCEL, confirmed
from jobs.admin.display import stamp, stamp_or_nothing
from jobs.models import Job, JobsConfig, State
from jobs.presentation import NOTHING, cancelling_running, duration
from jobs.workflows import operator

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    from jobs.workflows.operator import CancelReport, StepView, WorkflowView

#: The most steps the table lists; the job list, filtered by the workflow, has them all.
LISTED = 1_000

#: The widest graph scaled down to the page's width (12 px names stay 9 px or
#: more in the 900 px the admin leaves at 1280); a wider one scrolls, unscaled.
GRAPH_FITS = 1_200

#: The most dependencies a step's row lists unfolded.
FOLDED = 3

#: The states a workflow's cancel retires; the rest are settled.
UNSETTLED = (State.WAITING, State.QUEUED, State.RUNNING)


def workflow_page(
    model_admin: ModelAdmin[Job], request: HttpRequest, workflow_id: uuid.UUID
) -> HttpResponse:
    """The page, for anyone with the job list's view permission."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    view = _described(workflow_id)
    names = {step.job_id: step.name for step in view.steps}
    link = _JobLinks()
    context = {
        **_base(model_admin, request, view),
        "title": f"Workflow {view.name}",
        "picture": workflow_graph.draw([_node(step, link) for step in view.steps]),
        "graph_limit": workflow_graph.MAX_BOXES,
        "graph_fits": GRAPH_FITS,
        "rows": [_row(step, names, link) for step in view.steps[:LISTED]],
        "more": max(len(view.steps) - LISTED, 0),
        "can_cancel": model_admin.has_change_permission(request) and not view.settled,
        "now": timezone.now(),
    }
    return TemplateResponse(request, "admin/jobs/workflow.html", context)


def cancel_page(
    model_admin: ModelAdmin[Job], request: HttpRequest, workflow_id: uuid.UUID
) -> HttpResponse:
    """The page's Cancel: a POST asks (what it would retire, what happens to
    the running steps), the confirmation's POST (`post=yes`) cancels."""
    if not model_admin.has_change_permission(request):
        raise PermissionDenied
    page = reverse("admin:jobs_workflow", args=[workflow_id])
    if request.method != "POST":
        return HttpResponseRedirect(page)
    view = _described(workflow_id)
    if not confirmed(request):
        return _confirmation(model_admin, request, view, page)
    try:
        report = operator.cancel(
            workflow_id, by=f"admin:{request.user.get_username()}", using=Job.objects.db
        )
    except operator.UnknownWorkflow as error:
        raise Http404(str(error)) from None
    _report(model_admin, request, view, report)
    return HttpResponseRedirect(page)


def narrowed_to(request: HttpRequest) -> str:
    """The page of the workflow the job list is narrowed to (`?workflow_id=`), or ""."""
    try:
        return reverse("admin:jobs_workflow", args=[uuid.UUID(request.GET.get("workflow_id", ""))])
    except ValueError:
        return ""


def _described(workflow_id: uuid.UUID) -> WorkflowView:
    view = operator.describe(workflow_id, using=Job.objects.db)
    if view is None:
        raise Http404(f"No workflow {workflow_id} (its rows may have aged out).")
    return view


def _base(model_admin: ModelAdmin[Job], request: HttpRequest, view: WorkflowView) -> dict[str, Any]:
    """What the page and its confirmation share."""
    request.current_app = model_admin.admin_site.name
    changelist = reverse("admin:jobs_job_changelist")
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "workflow": view,
        # In `State`'s order, as `describe` counts them.
        "counts": [{"state": state, "count": count} for state, count in view.counts.items()],
        "jobs_url": f"{changelist}?workflow_id={view.id}",
        "page_url": reverse("admin:jobs_workflow", args=[view.id]),
        "cancel_url": reverse("admin:jobs_workflow_cancel", args=[view.id]),
        "media": model_admin.media,
    }


class _JobLinks:
    """Each step's job page, `reverse`d once for the page rather than once a
    step (a third of a second at 10,000 steps)."""

    def __init__(self) -> None:
        self.template = reverse("admin:jobs_job_change", args=[_ANY])

    def __call__(self, job_id: uuid.UUID) -> str:
        return self.template.replace(str(_ANY), str(job_id))


_ANY = uuid.UUID(int=0)


def _node(step: StepView, link: _JobLinks) -> workflow_graph.Node:
    """A step as the graph draws it: its box links to its job, its tooltip says
    the whole name, its state, attempts and time taken."""
    if step.state == State.WAITING:
        said = f"waiting for {step.unsettled_dependencies} of {len(step.waits_for)}"
    else:
        said = f"{step.state}, attempts {step.attempts} / {step.max_attempts}"
        if step.duration is not None:
            said += f", took {_duration(step.duration)}"
    title = f"{step.name}\n{said}"
    return workflow_graph.Node(
        id=step.job_id,
        name=step.name,
        state=str(step.state),
        url=link(step.job_id),
        title=title,
        after=tuple(step.waits_for),
    )


def _row(step: StepView, names: dict[uuid.UUID, str], link: _JobLinks) -> dict[str, Any]:
    """A step as the table lists it. A waiting step has no time to run yet:
    it says how many of its dependencies it still waits for."""
    outcomes = step.outcome_by_dependency
    if step.state == State.WAITING:
        next_up = f"waiting for {step.unsettled_dependencies} of {len(step.waits_for)}"
    elif step.state == State.QUEUED and step.run_at is not None:
        next_up = f"due {stamp(step.run_at)}"
    else:
        next_up = ""
    line = step.error_line or step.result_line or ""
    return {
        "step": step,
        "url": link(step.job_id),
        "next_up": next_up,
        "started": _parts(step.started_at),
        "finished": _parts(step.finished_at),
        "duration": _duration(step.duration),
        "line": Truncator(line).chars(200),
        "whole_line": line,
        "is_error": bool(step.error_line),
        "waits_for": [
            {"name": names.get(dep, str(dep)[:8]), "outcome": outcomes.get(dep)}
            for dep in step.waits_for
        ],
        # More than `FOLDED` are folded under their count, so that a fan-in's
        # row is not as tall as its fan-out.
        "folded": len(step.waits_for) > FOLDED,
        "settled_dependencies": len(step.waits_for) - step.unsettled_dependencies,
    }


def _parts(moment: datetime | None) -> tuple[str, ...]:
    """`stamp`'s words as the table wraps them: the date, then the time and
    zone, never broken inside either."""
    text = stamp_or_nothing(moment)
    return tuple(text.split(" ", 1)) if moment is not None else (text,)


def _duration(spent: timedelta | None) -> str:
    """How long a settled step's last attempt ran, or a dash."""
    return NOTHING if spent is None else duration(spent.total_seconds())


def _confirmation(
    model_admin: ModelAdmin[Job], request: HttpRequest, view: WorkflowView, page: str
) -> TemplateResponse:
    """Cancel this workflow? How many steps it retires, and what a running
    one's cancel cannot do (stop its handler), as the job list's Cancel says."""
    unsettled = sum(view.counts.get(state, 0) for state in UNSETTLED)
    running = view.counts.get(State.RUNNING, 0)
    context = {
        **_base(model_admin, request, view),
        "title": f"Cancel workflow {view.name}?",
        "unsettled": unsettled,
        "settled": len(view.steps) - unsettled,
        "running": running,
        "running_note": cancelling_running(
            running, JobsConfig.load(Job.objects.db).hard_kill_after
        ),
        "effect": CANCEL.effect,
        "skip_reason": CANCEL.skip_reason,
    }
    return TemplateResponse(request, "admin/jobs/workflow_cancel.html", context)


def _report(
    model_admin: ModelAdmin[Job], request: HttpRequest, view: WorkflowView, report: CancelReport
) -> None:
    """The cancel's outcome as a message, in `CancelReport`'s words (as
    `jobs workflow cancel` prints them)."""
    level = messages.SUCCESS if report.cancelled else messages.WARNING
    model_admin.message_user(request, f"Workflow {view.name}: {report}.", level)
