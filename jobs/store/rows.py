"""Claimed rows, decoded: what a claim hands the runner, built tolerantly and cheaply.

Every vendor's claim ends here. Two promises: decoding never raises for what
a row holds (a claim has already committed its rows as `running`, so a row
written by hand that a handler cannot use must come back marked `unusable`
for the runner to retire, not fail the other rows claimed with it), and the
claimed `Job` is built without `Model.__init__`'s per-field work, which was
the runner's largest cost per claimed row. The datetime decoders differ by
driver (PostgreSQL's loads dates, SQLite's returns text, MySQL's naive UTC).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models.base import ModelState
from django.utils.dateparse import parse_datetime
from django.utils.timezone import is_naive, make_aware, make_naive

from jobs.models import Job
from jobs.store.admission import Admission


@dataclass
class Claim:
    """A row this runner has just claimed, and whether it was taken over."""

    job: Job
    #: True when the row was `running` under an expired lease: its previous
    #: runner vanished without settling.
    reclaimed: bool
    #: Why the row cannot be handed to a handler as it is (a payload that is
    #: not a JSON object, a column that does not decode, all written by hand
    #: past `enqueue`), or None when it can. The runner retires such a claim.
    unusable: str | None = None
    #: For a reclaimed row: the vanished attempt's runner and start, as the
    #: row held them before this claim overwrote them; the runner writes its
    #: entry in the attempt record (`jobs.history`).
    previous: PreviousAttempt | None = None


@dataclass(frozen=True, slots=True)
class PreviousAttempt:
    """The attempt a reclaim took a row from."""

    runner: str
    started_at: datetime | None


#: The columns a claim reads back, in order; the vendor SQL lists the same.
CLAIM_COLUMNS = (
    "id",
    "kind",
    "key",
    "payload",
    "state",
    "attempts",
    "max_attempts",
    "run_at",
    "deadline",
    "last_error",
    "created_at",
    "finished_at",
    "errors",
    "queue",
    "priority",
    # For the attempt's span to link to (`jobs.tracing`); NULL on most rows.
    "traceparent",
    # Tells a workflow's step from a plain job (`jobs.workflows.hook`); NULL
    # on a plain job's row.
    "workflow_id",
)

#: The columns a claim writes from values it was given (`now`, and each
#: kind's end of lease from `lease_ends`), so they are set on the claimed
#: `Job` from those values rather than read back and decoded: three dates a
#: row, most of what decoding a claimed row cost.
CLAIM_WRITTEN_COLUMNS = ("lease_expires_at", "started_at", "updated_at", "claimed_by")

#: Concrete fields a claim neither reads nor writes, left deferred on the
#: claimed `Job` (Django loads one from its row when it is first read): the
#: generated `live`.
_DEFERRED = ("live",)

#: What `Job(...)` would set for the other concrete fields a claim does not return.
_UNCLAIMED_DEFAULTS = {
    field.attname: field.get_default()
    for field in Job._meta.concrete_fields
    if field.attname not in CLAIM_COLUMNS + CLAIM_WRITTEN_COLUMNS + _DEFERRED
}

#: The columns a claim reads back that hold a date and time.
DATETIME_COLUMNS = ("run_at", "deadline", "created_at", "finished_at")
#: Those of them that are never NULL: a claim that reads none there read a
#: value its driver could not hand over as a date (MySQL's zero date, which
#: mysqlclient gives as None).
REQUIRED_DATETIME_COLUMNS = ("run_at", "created_at")

#: How much of a value that cannot be used is quoted in the reason.
_QUOTE_CHARS = 200

#: A driver's value for a date column as an aware datetime (or None for
#: NULL); raises TypeError, ValueError or OverflowError, or returns None for
#: a value, when the value is not a date.
DatetimeDecoder = Callable[[Any], datetime | None]


def lease_ends(now: datetime, leases: Mapping[str, timedelta]) -> dict[str, datetime]:
    """Each kind's end of lease for a claim at `now`: what the claim writes, and
    what the claimed `Job` carries for its settle to be fenced on."""
    return {kind: now + lease for kind, lease in leases.items()}


def claim_from_row(
    row: Sequence[Any],
    reclaimed: bool,
    now: datetime,
    ends: Mapping[str, datetime],
    *,
    using: str,
    decode_datetime: DatetimeDecoder,
    runner: str = "",
    previous: tuple[Any, Any] | None = None,
) -> Claim:
    """A `Claim` from a row in `CLAIM_COLUMNS` order, without another query;
    `now`, `ends` and `runner` are what the claim wrote (see
    `CLAIM_WRITTEN_COLUMNS`), `using` the database it came from,
    `decode_datetime` its driver's decoder, and `previous` a reclaimed row's
    `claimed_by` and `started_at` as they were before the claim.

    Never raises for what the row holds. The claim has already moved the
    row to `running` and counted its attempt, so a row a handler cannot use
    (a payload that is not a JSON object, a date that does not decode,
    both only possible by writing the table by hand) must still come back
    as a claim, marked `unusable`, for the runner to retire: an exception
    here would lose every other row claimed in the same statement and
    stop the runner, and the bad row would be claimed again and again.
    """
    values = dict(zip(CLAIM_COLUMNS, row, strict=True))
    problems: list[str] = []
    values["id"] = decode_uuid(values["id"])
    if values["workflow_id"] is not None:
        values["workflow_id"] = decode_uuid(values["workflow_id"])
    values["payload"], problem = decode_payload(values["payload"])
    values["errors"] = decode_errors(values["errors"])
    if problem is not None:
        problems.append(problem)
    for column in DATETIME_COLUMNS:
        raw = values[column]
        try:
            values[column] = decode_datetime(raw)
        except (TypeError, ValueError, OverflowError) as error:
            values[column] = None
            problems.append(f"{column} is not a date and time: {_quote(raw)} ({error})")
        else:
            if raw is not None and values[column] is None:
                problems.append(f"{column} is not a date and time: {_quote(raw)}")
            elif raw is None and column in REQUIRED_DATETIME_COLUMNS:
                problems.append(
                    f"{column} is not a date and time: the driver read none "
                    "(a zero date written by hand?)"
                )
    for column in ("attempts", "max_attempts"):
        if isinstance(values[column], bool) or not isinstance(values[column], int):
            problems.append(f"{column} is not an integer: {_quote(values[column])}")
            values[column] = 0
    values["started_at"] = values["updated_at"] = now
    values["lease_expires_at"] = ends.get(values["kind"])
    values["claimed_by"] = runner
    return Claim(
        loaded_job(values, using),
        reclaimed,
        "; ".join(problems) or None,
        _previous_attempt(previous, decode_datetime) if reclaimed else None,
    )


def claims_from_rows(
    rows: Sequence[Sequence[Any]],
    prior: Callable[[Any], Sequence[Any]],
    admission: Admission,
    ends: Mapping[str, datetime],
    *,
    using: str,
    decode_datetime: DatetimeDecoder,
) -> list[Claim]:
    """`claim_from_row` for each row `admission`'s claim took, in claim order,
    where `prior(id)` gives what its ready read saw before the claim:
    (state, claimed_by, started_at)."""
    claims = []
    for row in rows:
        state, previous_runner, previous_start = prior(row[0])
        claims.append(
            claim_from_row(
                row,
                state == "running",
                admission.now,
                ends,
                using=using,
                decode_datetime=decode_datetime,
                runner=admission.runner,
                previous=(previous_runner, previous_start),
            )
        )
    return in_claim_order(claims)


def _previous_attempt(
    previous: tuple[Any, Any] | None, decode_datetime: DatetimeDecoder
) -> PreviousAttempt:
    """What a reclaimed row said of the attempt it was taken from; a start that
    does not decode is left unknown (the record only reports it)."""
    runner, started = previous if previous is not None else (None, None)
    try:
        # PostgreSQL hands it over as text (in an array with the prior state).
        started_at = parse_datetime(started) if isinstance(started, str) else None
        started_at = started_at or decode_datetime(started)
    except (TypeError, ValueError, OverflowError):
        started_at = None
    if started_at is not None and is_naive(started_at) == settings.USE_TZ:
        # Aware under `USE_TZ`, naive otherwise, as the claim's own dates are.
        started_at = make_aware(started_at, UTC) if settings.USE_TZ else make_naive(started_at)
    return PreviousAttempt(runner if isinstance(runner, str) else "", started_at)


def loaded_job(values: dict[str, Any], using: str) -> Job:
    """A `Job` as Django builds one from a query of database `using`, from
    already-decoded values.

    Set on the instance directly, as `Model.from_db` ends up doing, but
    without `Model.__init__`'s per-field work: that was the runner's
    largest cost per claimed row. Fields the claim does not read take
    their defaults, as `Job(**values)` would give them.
    """
    job = Job.__new__(Job)
    job.__dict__.update(_UNCLAIMED_DEFAULTS)
    job.__dict__.update(values)
    job._state = ModelState()
    job._state.adding = False
    job._state.db = using
    return job


def in_claim_order(claims: list[Claim]) -> list[Claim]:
    """`claims` in the order the claim took them: highest priority, then oldest
    `run_at`, then oldest row; a claim whose dates did not decode comes first
    within its priority."""

    def order(claim: Claim) -> tuple[Any, ...]:
        job = claim.job
        priority = job.priority if isinstance(job.priority, int) else 0
        return (
            -priority,
            job.run_at is not None,
            job.run_at or 0,
            job.created_at is not None,
            job.created_at or 0,
        )

    return sorted(claims, key=order)


def decode_errors(value: Any) -> Any:
    """The attempt record as Python: NULL (most rows: every attempt ended done)
    is empty. Read with the claim so that a retry's settle appends to it
    without reading the row again; while the attempt owns the row nobody else
    writes it (a cancel or a reclaim takes the row first, and the attempt's
    fenced write then loses). What does not decode is kept as it is, for
    `jobs.history`'s tolerant reader to skip."""
    if value is None:
        return []
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def decode_payload(value: Any) -> tuple[Any, str | None]:
    """The payload column as Python, and why a handler cannot use it (or None).

    Drivers hand JSON columns over as text (Django asks psycopg not to
    decode them; SQLite has only text). Only a JSON object is a payload:
    `enqueue` refuses anything else, so anything else was written by hand.
    An undecodable value is kept as the text it is, for the admin to show.
    """
    if value == "{}":
        return {}, None  # the payload of most jobs, and the default
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            return (
                value,
                f"payload is not a JSON object: it is not valid JSON ({error}): {_quote(value)}",
            )
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        return value, f"payload is not a JSON object: it is a JSON {kind}: {_quote(value)}"
    return value, None


def decode_uuid(value: Any) -> uuid.UUID:
    """An id column as a UUID, whether the driver gave one or its text."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def loaded_datetime(value: Any) -> datetime | None:
    """For drivers that load dates (psycopg): anything but a datetime is a value
    the driver could not load (PostgreSQL's `infinity`, say), passed on as text."""
    if value is None or isinstance(value, datetime):
        return value
    raise ValueError("the database driver cannot load it")


def text_datetime(value: Any) -> datetime | None:
    """For SQLite, whose dates are ISO text: parsed, and naive ones taken as UTC
    (as Django writes them); None for text that is not a date. Under
    `USE_TZ = False` Django writes wall times in `TIME_ZONE` and reads them
    back naive, and so does this: the runner's clock is naive then too."""
    moment = value if value is None or isinstance(value, datetime) else parse_datetime(str(value))
    if moment is not None and is_naive(moment) and settings.USE_TZ:
        moment = make_aware(moment, UTC)
    return moment


def placeholders(count: int) -> str:
    """`count` parameter placeholders for an `IN (...)` list."""
    return ", ".join(["%s"] * count)


def queue_filter(column: str, queues: Sequence[str] | None, paused: Sequence[str] = ()) -> str:
    """The claim's condition on `column` for a runner serving only `queues`
    (None: all) less the `paused` ones: a placeholder for each queue, then
    for each paused one (`queue_params`), after the kinds'; or nothing."""
    condition = f"AND {column} IN ({placeholders(len(queues))})" if queues else ""
    if paused:
        condition += f" AND {column} NOT IN ({placeholders(len(paused))})"
    return condition


def queue_params(queues: Sequence[str] | None, paused: Sequence[str] = ()) -> list[str]:
    """The parameters of `queue_filter`'s condition, in its order."""
    return [*(queues or ()), *paused]


def naive_utc_datetime(value: Any) -> datetime | None:
    """For MySQL, whose driver returns naive datetimes, in UTC as Django writes
    them (left naive under `USE_TZ = False`, as `text_datetime` says why)."""
    if isinstance(value, datetime) and is_naive(value) and settings.USE_TZ:
        return make_aware(value, UTC)
    return value  # type: ignore[no-any-return]


def _quote(value: Any) -> str:
    """`value` as an operator reads it in `last_error`, cut to a readable length."""
    text = repr(value)
    if len(text) > _QUOTE_CHARS:
        text = text[:_QUOTE_CHARS] + f"... ({len(text)} characters)"
    return text
