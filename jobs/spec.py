"""What to queue: `JobSpec`, and the checks that keep bad input out of the table.

A spec is validated in full before anything is written, so a refused spec
leaves no row behind and raises `InvalidJobSpec` naming the field at fault.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs.storable import JSON_MAX_DEPTH as JSON_MAX_DEPTH
from jobs.storable import Unstorable, json_text
from jobs.storable import strict_json as strict_json  # named here first: still importable here

#: Column widths, shared with the model so the check and the schema agree.
KIND_MAX_LENGTH = 100
KEY_MAX_LENGTH = 255
#: The largest payload `enqueue` accepts: 1 MiB (1,048,576 bytes) of its JSON
#: text as `json.dumps` writes it (non-ASCII characters count as their
#: `\uXXXX` escapes). A payload names its subject; it is not a place for the
#: subject's data. A megabyte of JSON is far past any identity and still well
#: within what every supported database stores in one column without trouble.
PAYLOAD_MAX_BYTES = 1024 * 1024
#: The largest `max_attempts` the column holds (a 32-bit integer on PostgreSQL).
MAX_ATTEMPTS_LIMIT = 2**31 - 1
#: The queue a job goes to when neither its spec nor its kind's handler names one.
DEFAULT_QUEUE = "default"
QUEUE_NAME_MAX_LENGTH = 100
#: A queue name: what a shell argument, a log line and a URL carry unquoted.
_QUEUE_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{QUEUE_NAME_MAX_LENGTH}}}")
#: Django's Task API range for `priority`: higher runs first, 0 by default.
PRIORITY_MIN, PRIORITY_MAX = -100, 100
DEFAULT_PRIORITY = 0


#: The largest `JobHandler.concurrency_limit`: far past any slot count, and
#: what every database's integer column holds.
CONCURRENCY_LIMIT_MAX = 100_000


def concurrency_limit_problem(limit: object) -> str | None:
    """Why `limit` cannot be a kind's concurrency limit, or None when it can:
    None (no limit) or an integer from 0 (hold every job of the kind) up."""
    if limit is None or (
        isinstance(limit, int)
        and not isinstance(limit, bool)
        and 0 <= limit <= CONCURRENCY_LIMIT_MAX
    ):
        return None
    return (
        f"concurrency_limit must be None or an integer from 0 to {CONCURRENCY_LIMIT_MAX} "
        f"(0 holds every job of the kind), got {limit!r}"
    )


def queue_name_problem(name: object) -> str | None:
    """Why `name` cannot be a queue name, or None when it can. Shared by the
    spec, the handler's class attribute and the `django.tasks` backend, so
    all three refuse the same names with the same sentence."""
    if isinstance(name, str) and _QUEUE_NAME.fullmatch(name):
        return None
    return (
        f"queue must be 1 to {QUEUE_NAME_MAX_LENGTH} letters, digits, '_', '-' or '.', got {name!r}"
    )


def kind_problem(kind: object) -> str | None:
    """Why `kind` cannot be a job's kind, or None when it can. Shared by the
    spec, the operator's controls and the `jobs` command's arguments, so a
    kind no job could have is refused with the same sentence everywhere."""
    return _identity_problem("kind", kind, KIND_MAX_LENGTH)


def _identity_problem(name: str, value: object, limit: int) -> str | None:
    """Why `value` cannot be the `name` field ("kind" or "key") of a job, or None
    when it can: text of 1 to `limit` characters that every database stores."""
    if not isinstance(value, str) or not value:
        return f"{name} must be a non-empty string, got {value!r}"
    if len(value) > limit:
        return f"{name} is {len(value)} characters; the limit is {limit}"
    if "\x00" in value:
        return f"{name} contains a NUL character, which PostgreSQL cannot store"
    try:
        value.encode()
    except UnicodeEncodeError as error:
        return f"{name} contains a lone surrogate, which is not text a database can store: {error}"
    return None


def priority_problem(priority: object) -> str | None:
    """Why `priority` cannot be a job's priority, or None when it can."""
    if (
        isinstance(priority, int)
        and not isinstance(priority, bool)
        and PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        return None
    return (
        f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX} "
        f"(higher runs first), got {priority!r}"
    )


#: The types whose values `json.loads(json.dumps(value))` gives back equal,
#: as dict values: text, numbers (NaN and the infinities are refused first),
#: true, false and null.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _round_trips_as_is(payload: dict[str, Any]) -> bool:
    """True for a flat payload (text keys, scalar values), which a JSON round
    trip always gives back equal: most payloads name their subject in a few
    scalars, and decoding them again to compare was a third of checking one."""
    scalars = _SCALARS
    return all(type(key) is str and type(value) in scalars for key, value in payload.items())


class InvalidJobSpec(ValueError):
    """A spec that can never be queued; nothing was written."""


@dataclass(frozen=True)
class JobSpec:
    """One job to queue.

    `payload` should hold the *identity* of the subject (an order id), never a
    snapshot of its state: a snapshot is stale by the time a retry runs. It
    must be a JSON object of at most `PAYLOAD_MAX_BYTES` (1 MiB) of JSON text,
    nested at most `JSON_MAX_DEPTH` (31) levels deep; `enqueue` refuses
    anything else with `InvalidJobSpec`, writing nothing.
    """

    #: Which handler runs it.
    kind: str
    #: The identity of the work within its kind. A live job holds it; a
    #: settled one releases it.
    key: str
    payload: dict[str, Any] = field(default_factory=dict)
    #: Not before this instant: aware, or naive (a wall time in `TIME_ZONE`)
    #: when `USE_TZ` is False, as Django keeps every datetime then.
    run_at: datetime = field(default_factory=timezone.now)
    #: The outer bound on retrying; `None` for none.
    deadline: datetime | None = None
    #: Overrides the configured `max_attempts` for this one job.
    max_attempts: int | None = None
    #: The queue it waits in; None for its handler's `queue` (else "default").
    queue: str | None = None
    #: -100 to 100, higher first; None for its handler's `priority` (else 0).
    priority: int | None = None

    @classmethod
    def now(cls, kind: str, key: str) -> JobSpec:
        """A job to run as soon as a runner can take it."""
        return cls(kind=kind, key=key)

    def with_payload(self, payload: dict[str, Any]) -> JobSpec:
        return dataclasses.replace(self, payload=payload)

    def with_deadline(self, deadline: datetime | None) -> JobSpec:
        return dataclasses.replace(self, deadline=deadline)

    def with_delay(self, delay: timedelta) -> JobSpec:
        """Run no sooner than `delay` from now.

        Raises `InvalidJobSpec` for a delay past the latest date a row can hold.
        """
        try:
            run_at = timezone.now() + delay
        except OverflowError:
            raise InvalidJobSpec(
                f"a delay of {delay} puts run_at past the latest date a job can hold "
                "(the year 9999)"
            ) from None
        return dataclasses.replace(self, run_at=run_at)

    def with_max_attempts(self, max_attempts: int | None) -> JobSpec:
        return dataclasses.replace(self, max_attempts=max_attempts)

    def with_queue(self, queue: str | None) -> JobSpec:
        return dataclasses.replace(self, queue=queue)

    def with_priority(self, priority: int | None) -> JobSpec:
        return dataclasses.replace(self, priority=priority)

    def encoded_payload(self) -> str:
        """The payload as JSON text, after checking it is a JSON object.

        Raises `InvalidJobSpec` for anything that would not survive a round
        trip through the column, is larger than `PAYLOAD_MAX_BYTES`, nests
        deeper than `JSON_MAX_DEPTH` or holds text a database refuses
        (`jobs.storable`).
        """
        if not isinstance(self.payload, dict):
            raise InvalidJobSpec(
                f"payload must be a JSON object (a dict), not {type(self.payload).__name__}"
            )
        if not self.payload:
            return "{}"  # the empty object passes every check below
        try:
            text = json_text(self.payload, "payload", PAYLOAD_MAX_BYTES)
        except Unstorable as error:
            raise InvalidJobSpec(str(error)) from error
        if not _round_trips_as_is(self.payload) and json.loads(text) != self.payload:
            # Non-string keys become strings and tuples become lists: the
            # handler would read back something other than what was queued.
            raise InvalidJobSpec(
                "payload does not survive a JSON round trip unchanged "
                "(keys must be strings; use lists, not tuples)"
            )
        return text

    def validate(self) -> str:
        """Raise `InvalidJobSpec` unless every field can be queued as it is.

        Returns the payload as the JSON text it checked, for the insert to
        write rather than encode again.
        """
        for name, value, limit in (
            ("kind", self.kind, KIND_MAX_LENGTH),
            ("key", self.key, KEY_MAX_LENGTH),
        ):
            if problem := _identity_problem(name, value, limit):
                raise InvalidJobSpec(problem)
        use_tz = settings.USE_TZ
        for name, moment in (("run_at", self.run_at), ("deadline", self.deadline)):
            if moment is None and name == "deadline":
                continue
            if not isinstance(moment, datetime):
                raise InvalidJobSpec(f"{name} must be a datetime, got {moment!r}")
            if use_tz and timezone.is_naive(moment):
                raise InvalidJobSpec(
                    f"{name} must be timezone-aware; a naive datetime is ambiguous ({moment})"
                )
            if not use_tz and timezone.is_aware(moment):
                # Django writes local times then and its SQLite and MySQL
                # backends refuse an aware one; refused here on every database.
                raise InvalidJobSpec(
                    f"{name} must be naive (a wall time in TIME_ZONE) when USE_TZ is False, "
                    f"got {moment.isoformat()}"
                )
            try:
                moment.astimezone(UTC)
            except OverflowError as error:
                # 0001-01-01 at +05:00 is still year 0 in UTC, which no
                # datetime (and so no row read back) can hold.
                raise InvalidJobSpec(
                    f"{name} {moment.isoformat()} is outside the years 1 to 9999 in UTC, "
                    "which is all a datetime can hold"
                ) from error
        if self.deadline is not None and self.deadline < self.run_at:
            raise InvalidJobSpec(
                f"deadline {self.deadline.isoformat()} is before run_at {self.run_at.isoformat()}"
            )
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise InvalidJobSpec(
                f"max_attempts must be a positive integer no larger than {MAX_ATTEMPTS_LIMIT}, "
                f"got {self.max_attempts!r}"
            )
        if self.queue is not None and (problem := queue_name_problem(self.queue)):
            raise InvalidJobSpec(problem)
        if self.priority is not None and (problem := priority_problem(self.priority)):
            raise InvalidJobSpec(problem)
        return self.encoded_payload()
