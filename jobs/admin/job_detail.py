"""A job's own page: every field, read-only, every time to the second with its zone.

Django draws a read-only `DateTimeField` as "Dec. 5, 2026, 3:32 a.m.": a
minute's precision and no zone, which is no use when lining a job's page up
against a runner's log. So each time is shown by a display method
(`<field>_shown`, `jobs.admin.display.stamp`) that keeps the field's label and
help text. `JobAdmin` takes the page from `JobDetail`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.admin import attempts
from jobs.admin.display import badge, breakable, pretty_json, stamp_or_nothing, time_field
from jobs.holding import Holders
from jobs.models import Job, State
from jobs.presentation import NOTHING, relative
from jobs.waiting import Holds, dependencies, describe

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec
    from django.utils.datastructures import _ListOrTuple

#: The job's times, each shown by its `<name>_shown` method.
TIMES = [
    "created_at",
    "updated_at",
    "finished_at",
    "run_at",
    "deadline",
    "started_at",
    "lease_expires_at",
    "abandon_owed_at",
]


def shown(name: str) -> str:
    """The display method that shows the time field `name`."""
    return f"{name}_shown"


def _time(name: str) -> Callable[[Any, Job], SafeString]:
    return time_field(Job, name)


def _label(name: str) -> str:
    return str(getattr(Job._meta.get_field(name), "verbose_name", name))


def _help_text(name: str) -> str:
    return str(getattr(Job._meta.get_field(name), "help_text", ""))


class JobDetail:
    """The fieldsets and display methods of a job's page."""

    fieldsets: ClassVar[_FieldsetSpec | None] = [
        (
            "Job",
            {
                "fields": [
                    "id",
                    "kind_shown",
                    "whole_key",
                    "queue",
                    "priority",
                    "state_badge",
                    shown("created_at"),
                    shown("updated_at"),
                    shown("finished_at"),
                    shown("abandon_owed_at"),
                    "workflow_link",
                ]
            },
        ),
        (
            "Schedule and attempts",
            {
                "fields": [
                    shown("run_at"),
                    "next_run",
                    "waiting_for",
                    shown("deadline"),
                    "attempts",
                    "max_attempts",
                    shown("started_at"),
                    shown("lease_expires_at"),
                    "claimed_by_holder",
                    "traceparent",
                ]
            },
        ),
        ("Attempt history", {"fields": ["attempt_history_table"], "classes": ["jobs-span"]}),
        ("Payload", {"fields": ["payload_json"], "classes": ["jobs-span"]}),
        ("Last error", {"fields": ["last_error_text"], "classes": ["jobs-span"]}),
        ("Result", {"fields": ["result_json"], "classes": ["jobs-span"]}),
    ]
    #: The page is for reading: every field it shows is read-only.
    readonly_fields: ClassVar[_ListOrTuple[str]] = flatten_fieldsets(fieldsets or ())

    created_at_shown = _time("created_at")
    updated_at_shown = _time("updated_at")
    finished_at_shown = _time("finished_at")
    deadline_shown = _time("deadline")
    started_at_shown = _time("started_at")
    abandon_owed_at_shown = _time("abandon_owed_at")

    @admin.display(description=_label("run_at"), ordering="run_at")
    def run_at_shown(self, job: Job) -> SafeString:
        """When the job is due; for a workflow's waiting step, that it is not
        due while it waits (its row holds a parked date, the year 9999)."""
        if job.state == State.WAITING:
            return format_html(
                '<span class="jobs-stamp">{}</span> <span class="jobs-quiet">{}</span>',
                NOTHING,
                "not due while it waits: see waiting for",
            )
        return _time("run_at")(self, job)

    @admin.display(description=_label("lease_expires_at"), ordering="lease_expires_at")
    def lease_expires_at_shown(self, job: Job) -> SafeString:
        """The lease's end, and for a running job whose lease has run out, that
        it has, and how long ago: the row waits for another runner to take it."""
        lease = job.lease_expires_at
        shown_at = format_html('<span class="jobs-stamp">{}</span>', stamp_or_nothing(lease))
        now = timezone.now()
        if lease is None or job.state != State.RUNNING or lease > now:
            return shown_at
        ago = relative(lease, now, glance=True)
        return format_html("{} {}", shown_at, badge(f"expired {ago}", "gone"))

    def get_form(
        self, request: HttpRequest, obj: Job | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        """The form, with each shown time, the kind and the key keeping their
        fields' help texts."""
        help_texts = {shown(name): _help_text(name) for name in TIMES}
        help_texts |= {"kind_shown": _help_text("kind"), "whole_key": _help_text("key")}
        return super().get_form(  # type: ignore[misc]  # a mixin of ModelAdmin
            request, obj, change, help_texts=help_texts, **kwargs
        )

    @admin.display(description="workflow")
    def workflow_link(self, job: Job) -> SafeString | str:
        """The workflow's page, for a step (`jobs.admin.workflow_page`); a dash for a plain job."""
        if job.workflow_id is None:
            return NOTHING
        return format_html(
            '<a class="jobs-workflow-link" href="{}">{}</a>',
            reverse("admin:jobs_workflow", args=[job.workflow_id]),
            job.workflow_id,
        )

    @admin.display(description="key")
    def whole_key(self, job: Job) -> SafeString:
        """The key in full (the list cuts a long one), wrapping between its parts."""
        return breakable(job.key)

    @admin.display(description="payload")
    def payload_json(self, job: Job) -> SafeString:
        return pretty_json(job.payload)

    @admin.display(description="result")
    def result_json(self, job: Job) -> SafeString | str:
        return NOTHING if job.result is None else pretty_json(job.result)

    @admin.display(description="claimed by")
    def claimed_by_holder(self, job: Job) -> SafeString | str:
        return attempts.holder(job, Holders.read(now=timezone.now()))

    @admin.display(description="waiting for")
    def waiting_for(self, job: Job) -> SafeString | str:
        """What holds the job back (`jobs.waiting`): a runner, a limit, a
        pause, its schedule or its run_at; the first is the one it is counted
        under on the dashboard."""
        now = timezone.now()
        stuck = Holders.read(now=now).stuck(job)
        holds = Holds.read(now=now).of(job, stuck=stuck)
        if (waits := dependencies(job, now=now)) is not None:
            holds.append(waits)
        if not holds:
            return describe(holds, job) if job.state == "queued" else NOTHING
        return format_html_join(
            "", '<div class="jobs-hold jobs-hold-{}">{}</div>', ((h.reason, str(h)) for h in holds)
        )

    @admin.display(description="attempts that did not end done")
    def attempt_history_table(self, job: Job) -> SafeString | str:
        return attempts.history_table(job)

    @admin.display(description="last error")
    def last_error_text(self, job: Job) -> SafeString | str:
        if not job.last_error:
            return NOTHING
        return format_html('<pre class="jobs-pre jobs-error-block">{}</pre>', job.last_error)
