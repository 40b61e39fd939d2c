"""The live config page: one row, edited by form, checked before it is saved.

There is one config row; the admin offers no way to add a second or delete
it, and the list page goes straight to the form, which edits every key
declared in `jobs.config`, each in its declared section. Invalid values are
refused by the form (the model's validators and `clean`) and never saved. When a
saved change reaches running runners is `jobs.config`'s business: each key
says at what grain it lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from jobs import config
from jobs.models import JobsConfig

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec


class JobsConfigAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    # Every declared key, in its declared section: a key cannot be left off.
    fieldsets: ClassVar[_FieldsetSpec | None] = [
        (title, {"fields": names})
        for title, names in [*config.sections(), ("Saved", ("updated_at",))]
    ]
    readonly_fields = ["updated_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: JobsConfig | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        row = JobsConfig.load()
        return HttpResponseRedirect(reverse("admin:jobs_jobsconfig_change", args=[row.pk]))
