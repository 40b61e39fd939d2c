"""The store's verbs and their promises; one subclass per database vendor.

Every write after a claim is a compare-and-set on that claim (id, `running`,
the attempt number and the lease it wrote) and returns whether it won, so a
late or stale attempt can never overwrite a newer one: the loser is told and
writes nothing. Verbs take `now` as an argument; only the runner reads the
clock. Verbs that are plain single-row updates are written once here with the
ORM; a vendor module holds the statements whose SQL differs (claim, insert).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, QuerySet
from django.db.models.base import ModelState

from jobs.config import BOUNDS
from jobs.models import LIVE_STATES, SETTLED_ROWS, SETTLED_STATES, Job, JobsConfig, State

_ATTEMPTS = BOUNDS["max_attempts"]


@dataclass(slots=True)
class NewJob:
    """A validated row to insert, as `jobs.queue` builds it from a spec.

    Not frozen: a frozen dataclass sets each field through `object.__setattr__`,
    which made building one five times slower, a tenth of `enqueue_many`'s
    Python per spec. Nothing writes to one after it is built, except
    `with_ids`, which gives each row without an id its own.
    """

    #: None for a row of `enqueue_many`: a store that must send an id gives
    #: it one with `with_ids`, PostgreSQL's database makes its own. `insert`
    #: is always handed an id (`enqueue` makes it, or its caller chooses it).
    id: uuid.UUID | None
    kind: str
    key: str
    payload: dict[str, Any]  # already checked to be a JSON object
    #: The payload as the JSON text `JobSpec.validate` checked.
    payload_json: str
    #: The spec's own budget, or None to take the configured one.
    max_attempts: int | None
    #: The budget to use when the spec has none and the config row is unusable.
    default_max_attempts: int
    run_at: datetime
    deadline: datetime | None
    now: datetime


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
)

#: The columns a claim writes from values it was given (`now`, and each
#: kind's end of lease from `lease_ends`), so they are set on the claimed
#: `Job` from those values rather than read back and decoded: three dates a
#: row, most of what decoding a claimed row cost.
CLAIM_WRITTEN_COLUMNS = ("lease_expires_at", "started_at", "updated_at")

#: What `Job(...)` would set for the concrete fields a claim does not return
#: (a generated column is left unset, as the ORM leaves it until it is read).
_UNCLAIMED_DEFAULTS = {
    field.attname: field.get_default()
    for field in Job._meta.concrete_fields
    if field.attname not in CLAIM_COLUMNS + CLAIM_WRITTEN_COLUMNS and not field.generated
}

#: The columns a claim reads back that hold a date and time.
DATETIME_COLUMNS = ("run_at", "deadline", "created_at", "finished_at")

#: How much of a value that cannot be used is quoted in the reason.
_QUOTE_CHARS = 200


class Store:
    """The only door to the `jobs_job` table for the queue and the runner."""

    def __init__(self, using: str) -> None:
        self.using = using

    @property
    def connection(self) -> BaseDatabaseWrapper:
        return connections[self.using]

    # -- vendor-specific -----------------------------------------------------

    def estimated_rows(self) -> int | None:
        """The table's row count as the database's statistics last saw it, reading
        no row; None where it keeps no such figure, or has not gathered it yet.

        For screens that would otherwise count a million rows on every view.
        """
        return None

    def state_shares(self) -> dict[str, float] | None:
        """Each common value of `state` with the share of rows that hold it, as the
        statistics last saw them; None where there are none."""
        return None

    #: Whether runners in other processes can be woken through the database.
    #: Where they cannot, they find new work at their next poll.
    wakes_other_processes = False

    def notify(self, payload: str = "") -> None:
        """Wake runners in other processes when the current transaction commits.

        A no-op where the database has no way to do it.
        """

    def listen(self, ring: Callable[[str], None], stopping: threading.Event) -> None:
        """Call `ring(payload)` whenever another process notifies, until `stopping` is set.

        Only for stores with `wakes_other_processes`; runs on its own thread
        and its own connection, and survives the database going away.
        """
        raise NotImplementedError

    #: The config row's `max_attempts` when it is usable, else NULL.
    CONFIGURED_MAX_ATTEMPTS_SQL = f"""
        SELECT max_attempts FROM jobs_jobsconfig
        WHERE id = {JobsConfig.SINGLETON_ID}
          AND max_attempts BETWEEN {_ATTEMPTS[0]} AND {_ATTEMPTS[1]}
    """

    #: Insert one queued row unless a live row holds its identity. Standard
    #: upsert syntax on PostgreSQL and SQLite: with no conflict target, DO
    #: NOTHING covers the identity's unique (kind, key, live), and RETURNING yields a row
    #: only when one was inserted. A spec without its own budget takes the
    #: config row's `max_attempts` in the same statement, so a change made in
    #: any process reaches the very next enqueue everywhere, at no extra round
    #: trip; a row holding an unusable value falls back to the initial config.
    INSERT_SQL = f"""
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts,
                              run_at, deadline, lease_expires_at, last_error,
                              created_at, updated_at, finished_at)
        VALUES (%s, %s, %s, %s, 'queued', 0,
                COALESCE(CAST(%s AS integer), ({CONFIGURED_MAX_ATTEMPTS_SQL}), %s),
                %s, %s, NULL, '', %s, %s, NULL)
        ON CONFLICT DO NOTHING
        RETURNING id
    """

    def insert(self, row: NewJob) -> bool:
        """Insert a queued row unless a live row holds its identity; True if inserted.

        Never raises for the identity conflict, so it cannot break a caller's
        transaction.
        """
        prepare = self.prepare
        params = [
            prepare("id", row.id),
            row.kind,
            row.key,
            prepare("payload", row.payload),
            row.max_attempts,
            row.default_max_attempts,
            prepare("run_at", row.run_at),
            prepare("deadline", row.deadline),
            prepare("created_at", row.now),
            prepare("updated_at", row.now),
        ]
        with self.connection.cursor() as cursor:
            cursor.execute(self.INSERT_SQL, params)
            return cursor.fetchone() is not None

    def insert_many(self, rows: Sequence[NewJob]) -> list[bool]:
        """Insert many queued rows, each unless its identity is held (by a live
        row, or by an earlier row of `rows`); for each row, whether it was.

        Here one insert per row inside one transaction (one commit); vendors
        with a bulk form override it.
        """
        with transaction.atomic(using=self.using):
            return [self.insert(row) for row in with_ids(rows)]

    def claim(self, now: datetime, leases: Mapping[str, timedelta], limit: int) -> list[Claim]:
        """Claim up to `limit` ready rows of the kinds in `leases`, in `run_at` order.

        Ready means `queued` with `run_at <= now`, or `running` with a lease
        that expired by `now`. Each claimed row becomes `running`, its
        `attempts` grows by one, and its lease is written as `now` plus its
        kind's entry in `leases`. Two concurrent claims never return one row.
        """
        raise NotImplementedError

    # -- fenced settles ------------------------------------------------------

    def _owned(self, job: Job) -> QuerySet[Job]:
        """The row, only while the attempt that `job` describes still owns it."""
        return Job.objects.using(self.using).filter(
            id=job.id,
            state=State.RUNNING,
            attempts=job.attempts,
            lease_expires_at=job.lease_expires_at,
        )

    def complete(self, job: Job, now: datetime, result: Any = None) -> bool:
        """Settle `done`, keeping `result` (JSON) when there is one."""
        fields: dict[str, Any] = {"result": result} if result is not None else {}
        return bool(
            self._owned(job).update(
                state=State.DONE, lease_expires_at=None, finished_at=now, updated_at=now, **fields
            )
        )

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        """Settle many attempts `done` (each with its result) in one transaction.

        Each row is fenced on its own attempt; returns the ids that settled.
        """
        won = set()
        with transaction.atomic(using=self.using):
            for job, result in done:
                if self.complete(job, now, result):
                    won.add(job.id)
        return won

    def settle_and_claim(
        self,
        done: Sequence[tuple[Job, Any]],
        now: datetime,
        leases: Mapping[str, timedelta],
        limit: int,
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        """`complete_many(done)` then `claim(...)`: the runner's pass, as few round
        trips as the vendor allows, in one transaction (one commit per pass).
        Returns the settled ids and the claims."""
        if not done:
            return set(), self.claim(now, leases, limit)
        with transaction.atomic(using=self.using):
            return self.complete_many(done, now), self.claim(now, leases, limit)

    def retry(self, job: Job, now: datetime, run_at: datetime, error: str) -> bool:
        """Back to `queued` at `run_at`, keeping the attempt count."""
        return bool(
            self._owned(job).update(
                state=State.QUEUED,
                run_at=run_at,
                lease_expires_at=None,
                last_error=error,
                updated_at=now,
            )
        )

    def retire(self, job: Job, now: datetime, error: str, state: str = State.FAILED) -> bool:
        """Settle for good as `state` (`failed` by default)."""
        return bool(
            self._owned(job).update(
                state=state,
                lease_expires_at=None,
                last_error=error,
                finished_at=now,
                updated_at=now,
            )
        )

    def reschedule(self, job: Job, now: datetime, run_at: datetime) -> bool:
        """Back to `queued` at `run_at` with a fresh attempt budget; identity kept."""
        return bool(
            self._owned(job).update(
                state=State.QUEUED,
                attempts=0,
                run_at=run_at,
                lease_expires_at=None,
                last_error="",
                updated_at=now,
            )
        )

    # -- operator verbs ------------------------------------------------------

    def run_now(self, job_id: uuid.UUID, now: datetime) -> bool:
        """Bring a queued row's `run_at` forward to `now`; False unless it is queued."""
        rows = Job.objects.using(self.using).filter(id=job_id, state=State.QUEUED)
        return bool(rows.update(run_at=now, updated_at=now))

    def cancel(self, job_id: uuid.UUID, now: datetime, reason: str) -> Job | None:
        """Retire a live row as `cancelled`; the row as it was, or None if it was not live.

        Not fenced on an attempt: cancelling is meant to overrule whichever
        attempt holds the row, whose own settle will then lose.
        """
        jobs = Job.objects.using(self.using)
        job = jobs.select_for_update().filter(id=job_id, state__in=LIVE_STATES).first()
        if job is None:
            return None
        jobs.filter(id=job_id, state__in=LIVE_STATES).update(
            state=State.CANCELLED,
            lease_expires_at=None,
            last_error=reason,
            finished_at=now,
            updated_at=now,
        )
        return job

    def requeue(self, job_id: uuid.UUID, now: datetime) -> bool:
        """Queue a failed or cancelled row again at `now` with a fresh attempt budget.

        Raises IntegrityError when a live row already holds its identity; the
        caller runs this in a savepoint.
        """
        rows = Job.objects.using(self.using).filter(
            id=job_id, state__in=[State.FAILED, State.CANCELLED]
        )
        return bool(
            rows.update(
                state=State.QUEUED,
                attempts=0,
                run_at=now,
                lease_expires_at=None,
                finished_at=None,
                updated_at=now,
            )
        )

    # -- maintenance ---------------------------------------------------------

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` settled rows that finished before `before`; the count."""
        jobs = Job.objects.using(self.using)
        ids = list(
            jobs.filter(SETTLED_ROWS, finished_at__lt=before)
            .order_by("finished_at")
            .values_list("id", flat=True)[:limit]
        )
        if not ids:
            return 0
        deleted, _ = jobs.filter(id__in=ids, state__in=SETTLED_STATES).delete()
        return deleted

    # -- helpers for vendor modules -------------------------------------------

    def prepare(self, column: str, value: Any) -> Any:
        """A Python value as the database driver wants it for `column`."""
        field = Job._meta.get_field(column)
        assert isinstance(field, Field), f"{column} is a concrete column"
        return field.get_db_prep_save(value, self.connection)

    def claim_from_row(
        self, row: Sequence[Any], reclaimed: bool, now: datetime, ends: Mapping[str, datetime]
    ) -> Claim:
        """A `Claim` from a row in `CLAIM_COLUMNS` order, without another query;
        `now` and `ends` are what the claim wrote (see `CLAIM_WRITTEN_COLUMNS`).

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
        values["id"] = self.decode_uuid(values["id"])
        values["payload"], problem = self.decode_payload(values["payload"])
        if problem is not None:
            problems.append(problem)
        for column in DATETIME_COLUMNS:
            raw = values[column]
            try:
                values[column] = self.decode_datetime(raw)
            except (TypeError, ValueError, OverflowError) as error:
                values[column] = None
                problems.append(f"{column} is not a date and time: {_quote(raw)} ({error})")
            else:
                if raw is not None and values[column] is None:
                    problems.append(f"{column} is not a date and time: {_quote(raw)}")
        for column in ("attempts", "max_attempts"):
            if isinstance(values[column], bool) or not isinstance(values[column], int):
                problems.append(f"{column} is not an integer: {_quote(values[column])}")
                values[column] = 0
        values["started_at"] = values["updated_at"] = now
        values["lease_expires_at"] = ends.get(values["kind"])
        return Claim(self._loaded_job(values), reclaimed, "; ".join(problems) or None)

    def _loaded_job(self, values: dict[str, Any]) -> Job:
        """A `Job` as Django builds one from a query, from already-decoded values.

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
        job._state.db = self.using
        return job

    @staticmethod
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
                    f"payload is not a JSON object: it is not valid JSON ({error}): "
                    f"{_quote(value)}",
                )
        if not isinstance(value, dict):
            kind = "null" if value is None else type(value).__name__
            return value, f"payload is not a JSON object: it is a JSON {kind}: {_quote(value)}"
        return value, None

    def decode_uuid(self, value: Any) -> uuid.UUID:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))

    def decode_datetime(self, value: Any) -> datetime | None:
        """For drivers that return datetimes: anything else is a value the
        driver could not load (PostgreSQL's `infinity`, say), passed on as text."""
        if value is None or isinstance(value, datetime):
            return value
        raise ValueError("the database driver cannot load it")


def with_ids(rows: Sequence[NewJob]) -> Sequence[NewJob]:
    """`rows`, each without an id given a random (version 4) UUID, as `uuid.uuid4`
    makes them, from one read of the system's randomness rather than one each."""
    missing = [row for row in rows if row.id is None]
    randomness = os.urandom(16 * len(missing))
    for n, row in enumerate(missing):
        row.id = uuid.UUID(bytes=randomness[16 * n : 16 * n + 16], version=4)
    return rows


def lease_ends(now: datetime, leases: Mapping[str, timedelta]) -> dict[str, datetime]:
    """Each kind's end of lease for a claim at `now`: what the claim writes, and
    what the claimed `Job` carries for its settle to be fenced on."""
    return {kind: now + lease for kind, lease in leases.items()}


def in_run_at_order(claims: list[Claim]) -> list[Claim]:
    """`claims` oldest `run_at` first; a claim whose `run_at` did not decode comes first."""
    return sorted(claims, key=lambda claim: (claim.job.run_at is not None, claim.job.run_at or 0))


def _quote(value: Any) -> str:
    """`value` as an operator reads it in `last_error`, cut to a readable length."""
    text = repr(value)
    if len(text) > _QUOTE_CHARS:
        text = text[:_QUOTE_CHARS] + f"... ({len(text)} characters)"
    return text
