"""The live config page: one row, edited by form, checked before it is saved.

There is one config row; the admin offers no way to add a second or delete
it, and the list page goes straight to the form, which edits every key
declared in `jobs.config`, each in its declared section. Each input's `min`
and `max` are the key's declared bounds, and a value past them is refused
with one message naming them, as `JobsSettings.problems` says it (the
model's own validators would only run after the form's, with other words).
Invalid values are refused by the form (those bounds and the model's
`clean`) and never saved. When a
saved change reaches running runners is `jobs.config`'s business: each key
says at what grain it lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.contrib import admin
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from jobs import config
from jobs.admin.display import time_field
from jobs.models import JobsConfig

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec


class JobsConfigAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    # Every declared key, in its declared section: a key cannot be left off.
    fieldsets: ClassVar[_FieldsetSpec | None] = [
        (title, {"fields": names})
        for title, names in [*config.sections(), ("Saved", ("updated_at_shown",))]
    ]
    readonly_fields = ["updated_at_shown"]

    updated_at_shown = time_field(JobsConfig, "updated_at")

    def formfield_for_dbfield(
        self, db_field: models.Field[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        """A declared key's input, bounded as declared, with one message."""
        key = config.DECLARATION.get(db_field.name)
        if key is None:
            return super().formfield_for_dbfield(db_field, request, **kwargs)
        said = f"{key.name} must be between {key.low} and {key.high}."
        return super().formfield_for_dbfield(
            db_field,
            request,
            min_value=key.low,
            max_value=key.high,
            error_messages={"min_value": said, "max_value": said},
            **kwargs,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: JobsConfig | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        row = JobsConfig.load()
        return HttpResponseRedirect(reverse("admin:jobs_jobsconfig_change", args=[row.pk]))
