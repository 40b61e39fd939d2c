"""The `Order` row: what a polling client reads, and all it ever reads.

Its state moves `pending` → `processing` (finalize) → `valid` or `invalid`, and
nothing moves it back. Only two writers exist after finalize, both in
`jobs.py` and both conditional on the order still being `processing`, so a
late answer can never overwrite a terminal one.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class State(models.TextChoices):
    PENDING = "pending", "pending"
    PROCESSING = "processing", "processing"
    VALID = "valid", "valid"
    INVALID = "invalid", "invalid"


#: The states an order never leaves.
TERMINAL_STATES = (State.VALID, State.INVALID)


class Order(models.Model):
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    reason = models.TextField(
        blank=True, default="", help_text="Why the order is invalid, as the client is told."
    )
    certificate = models.TextField(
        blank=True, default="", help_text="The issued certificate (PEM), once the order is valid."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Start-up recovery looks for orders left `processing`: a handful
            # among however many settled ones, so index only those.
            models.Index(
                fields=["id"],
                condition=Q(state=State.PROCESSING),
                name="orders_order_processing",
            ),
        ]

    def __str__(self) -> str:
        return f"order {self.pk} ({self.state})"
