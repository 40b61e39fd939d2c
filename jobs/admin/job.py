"""The job list and a job's page: find what is wrong, then act on it.

The list says at a glance what each job is waiting for (its next run, late
ones marked, a running job whose runner is gone said at once), who claimed
it, what went wrong (an error's telling line) and how many attempts it has
spent; it stays fast on a million rows (`jobs.admin.large_table`,
`jobs.admin.filters`) and asks once per page which runners are live. A job's
page (`jobs.admin.job_detail`) is read-only for everyone. Its state changes
only through three actions, Run now, Retry and Cancel, which go through
`jobs.operations`, so identity, attempts and fencing stay the store's
business: nothing here writes a job row itself. Cancel, which retires work,
asks first (`jobs.admin.confirm`). Any action on every job the filters match
(Django's "select all") counts them, asks with the number and acts in
batches (`jobs.admin.bulk`); the dead letters have their own page
(`jobs.admin.dead_letters`), and so has each workflow
(`jobs.admin.workflow_page`), linked from its steps.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from jobs import bulk, job_ids, operations, presentation
from jobs.admin import bulk as bulk_admin
from jobs.admin import confirm
from jobs.admin.confirm import CHANGE_FORM_ACTION
from jobs.admin.dashboard import dashboard_page
from jobs.admin.dead_letters import dead_letters_page
from jobs.admin.display import badge, breakable, stamp
from jobs.admin.filters import (
    HasErrorFilter,
    KindFilter,
    LeaseExpiredFilter,
    QueueFilter,
    StuckFilter,
    WaitingForHandlerFilter,
    WorkflowFilter,
)
from jobs.admin.job_detail import JobDetail
from jobs.admin.large_table import CalendarQuerySet, EstimatedCountPaginator
from jobs.admin.workflow_page import cancel_page, narrowed_to, workflow_page
from jobs.holding import RUNNER_GONE, Holders
from jobs.models import Job, State
from jobs.operations import Report
from jobs.presentation import NOTHING, relative, telling_line

#: The longest key the list shows whole, and the longest run of letters and
#: digits in it (a digest is cut to its start): whole on hover and on its page.
KEY_SHOWN, KEY_RUN = 60, 16

#: Actions offered both on the list and on a job's own page.
EVERYWHERE = [admin.ActionLocation.CHANGE_LIST, admin.ActionLocation.CHANGE_FORM]


class JobAdmin(JobDetail, admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    list_display = [
        "state_attempts",
        "kind_shown",
        "key_shown",
        "queue",
        "priority",
        "next_run",
        "claimed_by_shown",
        "error",
        "created",
    ]
    list_display_links = ["key_shown"]
    list_filter = [
        "state",
        KindFilter,
        QueueFilter,
        HasErrorFilter,
        LeaseExpiredFilter,
        StuckFilter,
        WaitingForHandlerFilter,
        WorkflowFilter,
    ]
    search_fields = ["key"]
    search_help_text = "A key (or part of one), or a job's id or its first 8 or more hex digits."
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
        context = {"title": "Jobs", "workflow_url": narrowed_to(request), **(extra_context or {})}
        return super().changelist_view(request, context)

    # -- list columns -------------------------------------------------------------

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        """The columns, those that ask who holds a job sharing one read of the
        runners (`Holders.read`) for the whole page rather than one per row."""
        page = _PageHolders(using=self.get_queryset(request).db)

        def with_holders(method: Callable[[Job, Holders | None], Any]) -> Callable[[Job], Any]:
            @functools.wraps(method)
            def column(job: Job) -> Any:
                return method(job, page.holders)

            return column

        return [
            with_holders(getattr(self, name)) if name in _HOLDER_COLUMNS else name
            for name in super().get_list_display(request)
        ]

    @admin.display(description="state", ordering="state")
    def state_badge(self, job: Job) -> SafeString:
        return badge(job.state, job.state)

    # Kind, key and runner name wrap between their parts, never inside a
    # word or a pid (`breakable`); a key past `KEY_SHOWN` characters, or with
    # a word past `KEY_RUN`, is cut, whole on hover and on the job's page.
    @admin.display(description="kind", ordering="kind")
    def kind_shown(self, job: Job) -> SafeString:
        return breakable(job.kind)

    @admin.display(description="key", ordering="key")
    def key_shown(self, job: Job) -> SafeString:
        shown = breakable(Truncator(job.key).chars(KEY_SHOWN), longest=KEY_RUN)
        if len(job.key) <= KEY_SHOWN and "…" not in shown:
            return shown
        return format_html('<span title="{}">{}</span>', job.key, shown)

    @admin.display(description="claimed by", ordering="claimed_by")
    def claimed_by_shown(self, job: Job) -> SafeString | str:
        return breakable(job.claimed_by) if job.claimed_by else NOTHING

    @admin.display(description="state, attempts", ordering="state")
    def state_attempts(self, job: Job) -> SafeString:
        """The state, and under it the attempts spent of the budget: one column
        where two did not leave the list room at 1280 px."""
        return format_html(
            '{}<br><span class="jobs-quiet" title="attempts spent of its budget">{} / {}</span>',
            badge(job.state, job.state),
            job.attempts,
            job.max_attempts,
        )

    @admin.display(description="next run", ordering="run_at")
    def next_run(self, job: Job, holders: Holders | None = None) -> SafeString:
        """When the job runs next; for a running job whose runner is gone, that
        at once, where its lease would still read as healthy."""
        now = timezone.now()
        holders = holders or Holders.read(now=now)
        if holders.stuck(job) == RUNNER_GONE:
            lease = job.lease_expires_at
            title = f"{job.claimed_by} has stopped reporting"
            if lease is not None:
                title += f"; another runner may take it over from {stamp(lease)}"
            return format_html('<span title="{}">{}</span>', title, badge(RUNNER_GONE, "gone"))
        css = "jobs-when jobs-late" if presentation.late(job, now) else "jobs-when"
        when = job.run_at if job.state == State.QUEUED else job.lease_expires_at
        title = stamp(when) if when else ""
        return format_html(
            '<span class="{}" title="{}">{}</span>',
            css,
            title,
            presentation.next_run(job, now, glance=True),
        )

    @admin.display(description="last error")
    def error(self, job: Job) -> SafeString | str:
        line = telling_line(job.last_error)
        if not line:
            return ""
        return format_html(
            '<span class="jobs-error-line" title="{}">{}</span>',
            Truncator(line).chars(500),
            breakable(Truncator(line).chars(80)),
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, job: Job) -> SafeString:
        return format_html(
            '<span class="jobs-when" title="{}">{}</span>',
            stamp(job.created_at),
            relative(job.created_at, timezone.now(), glance=True),
        )

    # -- search -------------------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """By key, as usual; a term that is a job's id, or its first 8 or more hex digits
        (`jobs.job_ids`, as `manage.py jobs` takes them), also finds the jobs it names."""
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        try:
            ident = job_ids.parse(search_term)
        except ValueError:
            return found, may_have_duplicates
        return found | queryset.filter(job_ids.matching(ident, queryset.db)), may_have_duplicates

    # -- actions ------------------------------------------------------------------

    @admin.action(description="Run now", permissions=["change"], location=EVERYWHERE)
    def run_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """Queued jobs become due now; runners in this process are woken."""
        if bulk_admin.across(request):
            return self._across(request, queryset, bulk.RUN_NOW)
        report = operations.run_now(_ids(request, queryset), by=_by(request))
        self._report(request, "Run now", report, "made due now")
        return None

    @admin.action(description="Retry", permissions=["change"], location=EVERYWHERE)
    def retry(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """Failed or cancelled jobs are queued again, due now, with a fresh attempt budget."""
        if bulk_admin.across(request):
            return self._across(request, queryset, bulk.RETRY)
        report = operations.retry(_ids(request, queryset), by=_by(request))
        self._report(request, "Retry", report, "queued again with a fresh attempt budget")
        return None

    @admin.action(description="Cancel", permissions=["change"], location=EVERYWHERE)
    def cancel(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """Queued or running jobs are retired as cancelled; each handler's abandon runs once.

        Asked first (`jobs.admin.confirm`): only the confirmation's POST writes."""
        if bulk_admin.across(request) and CHANGE_FORM_ACTION not in request.POST:
            return self._across(request, queryset, bulk.CANCEL)
        if not confirm.confirmed(request):
            return confirm.confirmation_page(self, request, queryset, confirm.CANCEL)
        report = operations.cancel(_ids(request, queryset), by=_by(request))
        self._report(request, "Cancel", report, "cancelled")
        return None

    def _across(
        self, request: HttpRequest, queryset: QuerySet[Job], action: bulk.Action
    ) -> HttpResponse | None:
        """`action` on every job the list's filters match (`jobs.admin.bulk`)."""
        selection = bulk.Selection(queryset, said=bulk_admin.matching(request))
        return bulk_admin.confirm_or_act(
            self, request, selection, action, fields={"action": action.name}
        )

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
        page = path(
            "dashboard/",
            self.admin_site.admin_view(self.dashboard_view),
            name="jobs_dashboard",
        )
        dead = path(
            "dead-letters/",
            self.admin_site.admin_view(functools.partial(dead_letters_page, self)),
            name="jobs_dead_letters",
        )
        workflow = path(
            "workflow/<uuid:workflow_id>/",
            self.admin_site.admin_view(functools.partial(workflow_page, self)),
            name="jobs_workflow",
        )
        cancel_workflow = path(
            "workflow/<uuid:workflow_id>/cancel/",
            self.admin_site.admin_view(functools.partial(cancel_page, self)),
            name="jobs_workflow_cancel",
        )
        # Ahead of the model's own routes, whose `<path:object_id>/` would
        # otherwise take "dashboard/" for a job id.
        return [page, dead, workflow, cancel_workflow, *super().get_urls()]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        """The dashboard (`jobs.admin.dashboard`), behind the job list's view permission."""
        return dashboard_page(self, request)


#: The list's columns that ask `Holders` who holds a job.
_HOLDER_COLUMNS = {"next_run"}


class _PageHolders:
    """The runners heard from, read once for a page, when a column first asks."""

    def __init__(self, using: str) -> None:
        self.using = using

    @functools.cached_property
    def holders(self) -> Holders:
        return Holders.read(self.using, timezone.now())


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


def _by(request: HttpRequest) -> str:
    """Who an action is by, as the record and the log name them: `admin:<user>`,
    as the controls page stamps its changes (`manage.py jobs` says `cli:<user>`)."""
    return f"admin:{request.user.get_username()}"


def _jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"
