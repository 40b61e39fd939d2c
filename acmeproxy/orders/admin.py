"""The admin: orders as a window, read-only. Their state changes only through the
API and the relay, so the admin cannot put an order somewhere the relay does not
expect."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from acmeproxy.orders.models import Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    list_display = ["id", "state", "reason", "created_at", "updated_at"]
    list_filter = ["state"]
    readonly_fields = ["state", "reason", "certificate", "created_at", "updated_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False
