"""What to queue: `JobSpec`, and the checks that keep bad input out of the table.

A spec is validated in full before anything is written, so a refused spec
leaves no row behind and raises `InvalidJobSpec` naming the field at fault.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

#: Column widths, shared with the model so the check and the schema agree.
KIND_MAX_LENGTH = 100
KEY_MAX_LENGTH = 255
#: A payload names its subject; it is not a place for the subject's data. A
#: megabyte of JSON is far past any identity and still well within what every
#: supported database stores in one column without trouble.
PAYLOAD_MAX_BYTES = 1024 * 1024


class InvalidJobSpec(ValueError):
    """A spec that can never be queued; nothing was written."""


@dataclass(frozen=True)
class JobSpec:
    """One job to queue.

    `payload` should hold the *identity* of the subject (an order id), never a
    snapshot of its state: a snapshot is stale by the time a retry runs.
    """

    #: Which handler runs it.
    kind: str
    #: The identity of the work within its kind. A live job holds it; a
    #: settled one releases it.
    key: str
    payload: dict[str, Any] = field(default_factory=dict)
    #: Not before this instant.
    run_at: datetime = field(default_factory=timezone.now)
    #: The outer bound on retrying; `None` for none.
    deadline: datetime | None = None
    #: Overrides the configured `max_attempts` for this one job.
    max_attempts: int | None = None

    @classmethod
    def now(cls, kind: str, key: str) -> JobSpec:
        """A job to run as soon as a runner can take it."""
        return cls(kind=kind, key=key)

    def with_payload(self, payload: dict[str, Any]) -> JobSpec:
        return dataclasses.replace(self, payload=payload)

    def with_deadline(self, deadline: datetime | None) -> JobSpec:
        return dataclasses.replace(self, deadline=deadline)

    def with_delay(self, delay: timedelta) -> JobSpec:
        """Run no sooner than `delay` from now."""
        return dataclasses.replace(self, run_at=timezone.now() + delay)

    def with_max_attempts(self, max_attempts: int | None) -> JobSpec:
        return dataclasses.replace(self, max_attempts=max_attempts)

    def encoded_payload(self) -> str:
        """The payload as JSON text, after checking it is a JSON object.

        Raises `InvalidJobSpec` for anything that would not survive a round
        trip through the column or is larger than `PAYLOAD_MAX_BYTES`.
        """
        if not isinstance(self.payload, dict):
            raise InvalidJobSpec(
                f"payload must be a JSON object (a dict), not {type(self.payload).__name__}"
            )
        try:
            text = json.dumps(self.payload, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidJobSpec(f"payload is not JSON-serialisable: {error}") from error
        size = len(text.encode())
        if size > PAYLOAD_MAX_BYTES:
            raise InvalidJobSpec(
                f"payload is {size} bytes of JSON; the limit is {PAYLOAD_MAX_BYTES}"
            )
        if "\\u0000" in text:
            raise InvalidJobSpec("payload contains a NUL character, which PostgreSQL cannot store")
        if json.loads(text) != self.payload:
            # Non-string keys become strings and tuples become lists: the
            # handler would read back something other than what was queued.
            raise InvalidJobSpec(
                "payload does not survive a JSON round trip unchanged "
                "(keys must be strings; use lists, not tuples)"
            )
        return text

    def validate(self) -> None:
        """Raise `InvalidJobSpec` unless every field can be queued as it is."""
        for name, value, limit in (
            ("kind", self.kind, KIND_MAX_LENGTH),
            ("key", self.key, KEY_MAX_LENGTH),
        ):
            if not isinstance(value, str) or not value:
                raise InvalidJobSpec(f"{name} must be a non-empty string, got {value!r}")
            if len(value) > limit:
                raise InvalidJobSpec(f"{name} is {len(value)} characters; the limit is {limit}")
            if "\x00" in value:
                raise InvalidJobSpec(
                    f"{name} contains a NUL character, which PostgreSQL cannot store"
                )
        for name, moment in (("run_at", self.run_at), ("deadline", self.deadline)):
            if moment is None and name == "deadline":
                continue
            if not isinstance(moment, datetime):
                raise InvalidJobSpec(f"{name} must be a datetime, got {moment!r}")
            if timezone.is_naive(moment):
                raise InvalidJobSpec(
                    f"{name} must be timezone-aware; a naive datetime is ambiguous ({moment})"
                )
        if self.deadline is not None and self.deadline < self.run_at:
            raise InvalidJobSpec(
                f"deadline {self.deadline.isoformat()} is before run_at {self.run_at.isoformat()}"
            )
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise InvalidJobSpec(
                f"max_attempts must be a positive integer, got {self.max_attempts!r}"
            )
        self.encoded_payload()
