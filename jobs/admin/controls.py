"""The operator's live controls page: pause and resume a queue or a kind, and
set a kind's concurrency limit without a deploy.

Each save is checked as a runner would read it (`jobs.controls.problem`), so
nothing the runners would ignore is ever saved here; each change is stamped
and logged with the admin user who made it. Runners apply it from their next
claim (at once where saves wake them, else within the config re-read).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString

from jobs import controls
from jobs.admin.display import badge, time_field
from jobs.models import Control
from jobs.spec import CONCURRENCY_LIMIT_MAX


class ControlForm(forms.ModelForm):  # type: ignore[type-arg]  # not subscriptable at runtime
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
        return cleaned


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

    changed_at_shown = time_field(Control, "changed_at")

    class Media:
        css = {"all": ["jobs/admin.css"]}

    @admin.display(description="paused", ordering="paused")
    def state(self, row: Control) -> SafeString:
        """In words, never Django's boolean icons: a paused queue's green tick
        read as healthy. Paused is the alarm colour; running is quiet."""
        return badge("paused", "gone") if row.paused else badge("running", "live")

    def save_model(self, request: HttpRequest, obj: Control, form: Any, change: bool) -> None:
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
        done = [
            controls.pause(row.scope, row.name, _by(request), paused, using=queryset.db)
            for row in queryset
        ]
        said = "Paused" if paused else "Resumed"
        names = ", ".join(f"{row.scope} {row.name}" for row in done)
        self.message_user(request, f"{said}: {names}.", messages.SUCCESS)
