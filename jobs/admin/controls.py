"""The operator's live controls page: pause and resume a queue or a kind, and
set a kind's concurrency limit without a deploy.

Each save is checked as a runner would read it (`jobs.controls.problem`), so
nothing the runners would ignore is ever saved here; each change is stamped
and logged with the admin user who made it. Runners apply it from their next
claim (at once where saves wake them, else within the config re-read).

"Add control" for a queue or kind that already has a row (left by the CLI,
or added in another tab) writes the form's values onto that row, and says so
with what the row said before, rather than refusing with the uniqueness
error: the operator asked for that queue to be paused, and one row per
queue or kind is all a runner reads.
"""

from __future__ import annotations

import copy
from typing import Any
from weakref import WeakKeyDictionary

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from jobs import controls
from jobs.admin.display import badge, time_field
from jobs.models import Control
from jobs.spec import CONCURRENCY_LIMIT_MAX


class ControlForm(forms.ModelForm):  # type: ignore[type-arg]  # not subscriptable at runtime
    #: On "Add control": the row of the same scope and name that already
    #: existed, as it stood, which the form's values are written onto.
    replacing: Control | None = None
    #: Whether this user may change an existing row (`ControlAdmin.get_form`):
    #: writing onto one is a change, not an addition.
    may_replace = False

    class Meta:
        model = Control
        fields = ["scope", "name", "paused", "concurrency_limit"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The input's bounds are the ones `controls.problem` holds it to.
        limit = self.fields["concurrency_limit"]
        limit.widget.attrs.update(min=0, max=CONCURRENCY_LIMIT_MAX)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        candidate = Control(
            scope=cleaned.get("scope", ""),
            name=cleaned.get("name", ""),
            paused=cleaned.get("paused", False),
            concurrency_limit=cleaned.get("concurrency_limit"),
        )
        if not self.errors and (problem := controls.problem(candidate)):
            raise forms.ValidationError(problem)
        if not self.errors and self.instance._state.adding:
            existing = Control.objects.filter(scope=candidate.scope, name=candidate.name).first()
            if existing is not None and not self.may_replace:
                raise forms.ValidationError(
                    f"{existing} already has a control, and changing it needs the "
                    "permission to change controls."
                )
            if existing is not None:
                # The form's values are copied onto the existing row next
                # (`_post_clean`), which the uniqueness check then passes.
                self.replacing = copy.copy(existing)
                self.instance = existing
        return cleaned


def _said(row: Control) -> str:
    """What a control row says, as the add form's note repeats it."""
    parts = ["paused" if row.paused else "not paused"]
    if row.concurrency_limit is not None:
        parts.append(f"limit {row.concurrency_limit}")
    at = row.changed_at.isoformat(timespec="seconds") if row.changed_at else "?"
    return f"{', '.join(parts)}; changed by {row.changed_by or '?'} at {at}"


#: The add requests whose form wrote onto an existing row, and what it said.
_REPLACED: WeakKeyDictionary[HttpRequest, Control] = WeakKeyDictionary()


def _by(request: HttpRequest) -> str:
    return f"admin:{request.user.get_username()}"


class ControlAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    form = ControlForm
    list_display = [
        "scope",
        "name",
        "state",
        "concurrency_limit",
        "changed_by",
        "changed_at_shown",
    ]
    list_filter = ["scope", "paused"]
    search_fields = ["name"]
    readonly_fields = ["changed_by", "changed_at_shown"]
    actions = ["pause_selected", "resume_selected"]

    def get_form(
        self, request: HttpRequest, obj: Control | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"may_replace": self.has_change_permission(request)})

    changed_at_shown = time_field(Control, "changed_at")

    class Media:
        css = {"all": ["jobs/admin.css"]}

    @admin.display(description="paused", ordering="paused")
    def state(self, row: Control) -> SafeString:
        """In words, never Django's boolean icons: a paused queue's green tick
        read as healthy. Paused is the alarm colour; running is quiet."""
        return badge("paused", "gone") if row.paused else badge("running", "live")

    def save_model(self, request: HttpRequest, obj: Control, form: Any, change: bool) -> None:
        if not change and (before := getattr(form, "replacing", None)) is not None:
            _REPLACED[request] = before
        obj.changed_by, obj.changed_at = _by(request), timezone.now()
        super().save_model(request, obj, form, change)
        controls.logged(
            "jobs_control_changed",
            obj.scope,
            obj.name,
            obj.changed_by,
            paused=obj.paused,
            concurrency_limit=obj.concurrency_limit,
        )

    def log_addition(self, request: HttpRequest, obj: Control, message: Any) -> Any:
        """An add that wrote onto an existing row is that row's change in its history,
        naming the columns it changed."""
        before = _REPLACED.get(request)
        if before is None:
            return super().log_addition(request, obj, message)
        changed = [
            str(capfirst(field.verbose_name))
            for field in Control._meta.fields
            if field.name in ("paused", "concurrency_limit")
            and getattr(before, field.name) != getattr(obj, field.name)
        ]
        return self.log_change(request, obj, [{"changed": {"fields": changed}}])

    def response_add(
        self, request: HttpRequest, obj: Control, post_url_continue: str | None = None
    ) -> HttpResponse:
        """After an add that wrote onto an existing row: say so, and what the row said
        before, then go on as after a change."""
        before = _REPLACED.pop(request, None)
        if before is None:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(
            request,
            f"{obj} already had a control ({_said(before)}), so this form's values were "
            "written onto it rather than adding a second one: one row per queue or kind "
            "is what runners read.",
            messages.WARNING,
        )
        if "_continue" in request.POST:
            return HttpResponseRedirect(reverse("admin:jobs_control_change", args=[obj.pk]))
        if "_addanother" in request.POST:
            return HttpResponseRedirect(request.path)
        return self.response_post_save_change(request, obj)

    def delete_model(self, request: HttpRequest, obj: Control) -> None:
        super().delete_model(request, obj)
        controls.logged("jobs_control_removed", obj.scope, obj.name, _by(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Control]) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    @admin.action(description="Pause the selected queues and kinds")
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Control]) -> None:
        self._pause(request, queryset, paused=True)

    @admin.action(description="Resume the selected queues and kinds")
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Control]) -> None:
        self._pause(request, queryset, paused=False)

    def _pause(self, request: HttpRequest, queryset: QuerySet[Control], *, paused: bool) -> None:
        rows = list(queryset)
        for row in rows:
            controls.pause(row.scope, row.name, _by(request), paused, using=queryset.db)
        said = "Paused" if paused else "Resumed"
        names = ", ".join(f"{row.scope} {row.name}" for row in rows)
        self.message_user(request, f"{said}: {names}.", messages.SUCCESS)
