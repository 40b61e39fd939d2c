"""PostgreSQL: the claim as one statement with `FOR UPDATE SKIP LOCKED`, and
an insert that notifies the runners listening in other processes.

Concurrent runners skip each other's locked rows instead of queueing on them,
which is what lets many `runjobs` processes on many machines share one table.
Every enqueue notifies a channel inside its own statement, so the notice goes
out when (and only if) the enqueuing transaction commits, and every listening
runner wakes (`jobs.notifier.postgresql` listens); the claim still gives
each row to one of them.

The verbs are here; their statements in `.sql`, and how those are sent
(server-bound, prepared) in `.driver`; the wake-up channel's in `.channel`;
workflows' write and release in `.workflows`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.db import transaction
from psycopg.types.json import Jsonb

from jobs.models import Job
from jobs.spec import strict_json
from jobs.store.admission import Admission
from jobs.store.base import (
    RENEW_LOCK_TIMEOUT,
    ConnectionLimit,
    ConnectionRoom,
    NewJob,
    Renewal,
)
from jobs.store.orm import OrmStore
from jobs.store.postgresql import channel, driver, preparing, sql
from jobs.store.postgresql import workflows as _workflows  # noqa: F401  (registers its own)
from jobs.store.postgresql.driver import array_literal, plain_array_literal
from jobs.store.rows import Claim, claim_from_row, in_claim_order, lease_ends, loaded_datetime

#: Rows per statement of `insert_many`. The statements go out in one pipeline,
#: so PostgreSQL inserts one while Python writes the arrays of the next, which
#: made chunks of 500 to 1,000 faster than one statement for the batch.
INSERT_MANY_CHUNK = 1_000


class PostgreSQLStore(OrmStore):
    #: The single insert's statement sends the NOTIFY (`sql.INSERT_SQL`);
    #: `insert_many` sends one in its transaction.
    inserts_notify = True
    #: In the claim's own statement (`sql.CLAIM_CAPPED_SQL`).
    applies_kind_caps = True

    def insert(self, row: NewJob) -> bool:
        """The portable insert with its notice, bound by the server and prepared
        (see `driver.hot_cursor`): quoting ten values on the client was most of
        an enqueue's own time."""
        params = [
            row.id,
            row.kind,
            row.key,
            Jsonb(row.payload_json, dumps=driver.already_json),
            row.max_attempts,
            row.default_max_attempts,
            row.run_at,
            row.deadline,
            row.queue,
            row.priority,
            row.now,
            row.now,
            row.traceparent,
        ]
        return bool(driver.fetch(self.connection, sql.INSERT_SQL, params))

    def insert_many(self, rows: Sequence[NewJob]) -> list[bool]:
        """A statement per `INSERT_MANY_CHUNK` rows, all sent in one pipeline
        inside one transaction, then one notice if anything was inserted.

        Each statement's columns are array literals (see `driver.array_literal`).
        The statements run in order, so a row refused for an identity an
        earlier chunk took is refused as it would be inside one statement; a
        statement that fails rolls back every chunk with it.
        """
        if not rows:
            return []
        chunks = [rows[n : n + INSERT_MANY_CHUNK] for n in range(0, len(rows), INSERT_MANY_CHUNK)]
        queued = [False] * len(rows)
        connection = self.connection
        with (
            preparing.mix_ups_explained(connection),
            transaction.atomic(using=self.using),
            contextlib.ExitStack() as cursors,
        ):
            connection.ensure_connection()
            prepare = preparing.prepares(connection)  # before the pipeline: may ask the server
            with connection.wrap_database_errors, connection.connection.pipeline():
                sent = []
                for chunk in chunks:
                    cursor = cursors.enter_context(driver.hot_cursor(connection, prepare=prepare))
                    cursor.execute(sql.INSERT_MANY_SQL, _insert_many_params(chunk))
                    sent.append(cursor)
                # Written while PostgreSQL inserts: which row each identity names.
                first: dict[tuple[str, str], int] = {}
                for n, row in enumerate(rows):
                    first.setdefault((row.kind, row.key), n)
                for cursor in sent:
                    for job_id, kind, key in cursor.fetchall():
                        queued[first[kind, key]] = True
                        rows[first[kind, key]].id = job_id  # the database chose it
            if any(queued):
                channel.notify(connection)
        return queued

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        if not done:
            return set()
        params = {"now": now, **_settle_params(done)}
        rows = driver.fetch(
            self.connection, sql.COMPLETE_MANY_SQL, params, planner_settings=True, quiet=True
        )
        return {row[0] for row in rows}

    def settle_and_claim(
        self, done: Sequence[tuple[Job, Any]], admission: Admission
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        if not done or admission.empty:
            return super().settle_and_claim(done, admission)
        rows, ends = self._fetch_claim(
            admission, sql.SETTLE_AND_CLAIM_SQL, sql.SETTLE_AND_CLAIM_CAPPED_SQL, done
        )
        won = {row[1] for row in rows if row[0] == "settled"}
        claimed = [row[1:] for row in rows if row[0] == "claimed"]
        return won, self._claims(claimed, admission, ends)

    def claim(self, admission: Admission) -> list[Claim]:
        if admission.empty:
            return []
        rows, ends = self._fetch_claim(admission, sql.CLAIM_SQL, sql.CLAIM_CAPPED_SQL)
        return self._claims(rows, admission, ends)

    def _fetch_claim(
        self,
        admission: Admission,
        statement: str,
        capped: str,
        done: Sequence[tuple[Job, Any]] = (),
    ) -> tuple[list[tuple[Any, ...]], dict[str, datetime]]:
        """The rows of the claim's `statement` (`capped` where the admission
        caps kinds), settling `done` in it when there are some, and the end
        of each kind's lease it wrote."""
        ends = lease_ends(admission.now, admission.leases)
        params = _claim_params(admission, ends)
        if done:
            params.update(_settle_params(done))
        rows = driver.fetch(
            self.connection,
            capped if admission.kind_caps else statement,
            params,
            planner_settings=True,
            claimed_rows=True,
            quiet=True,
        )
        return rows, ends

    def _claims(
        self, rows: Sequence[Sequence[Any]], admission: Admission, ends: Mapping[str, datetime]
    ) -> list[Claim]:
        """Claims from a claim's rows (its columns, then what each row was
        before: its state, runner and start), oldest `run_at` first."""
        using, now, runner = self.using, admission.now, admission.runner
        claims = [
            claim_from_row(
                row[:-1],
                row[-1][0] == "running",
                now,
                ends,
                using=using,
                decode_datetime=loaded_datetime,
                runner=runner,
                previous=(row[-1][1], row[-1][2]),
            )
            for row in rows
        ]
        return in_claim_order(claims)

    def renew(self, jobs: Sequence[Job], until: datetime, limited: Sequence[uuid.UUID]) -> Renewal:
        """One statement (`sql.RENEW_SQL`) under a lock timeout of
        `RENEW_LOCK_TIMEOUT` for this transaction alone."""
        if not jobs:
            return Renewal(frozenset())
        params: dict[str, Any] = {
            "ids": plain_array_literal(job.id.hex for job in jobs),
            "attempts": plain_array_literal(str(job.attempts) for job in jobs),
            "leases": plain_array_literal(
                None if job.lease_expires_at is None else job.lease_expires_at.isoformat()
                for job in jobs
            ),
            "limited": plain_array_literal(job_id.hex for job_id in limited),
            "until": until,
        }
        timeout = f"{RENEW_LOCK_TIMEOUT / timedelta(milliseconds=1):.0f}ms"
        with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            cursor.execute(sql.LOCK_TIMEOUT_SQL, [timeout])
            cursor.execute(sql.RENEW_SQL, params)
            rows = cursor.fetchall()
        return Renewal(
            renewed=frozenset(job_id for job_id, renewed in rows if renewed),
            held=frozenset(job_id for job_id, renewed in rows if not renewed),
        )

    def database_now(self) -> datetime | None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.CLOCK_SQL)
            return cursor.fetchone()[0]  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def gated(self, kinds: Sequence[str]) -> Iterator[set[str]]:
        """A transaction-scoped advisory lock per kind, tried without waiting."""
        with transaction.atomic(using=self.using):
            if not kinds:
                yield set()
                return
            with self.connection.cursor() as cursor:
                cursor.execute(sql.GATES_SQL, [list(kinds)])
                held = {row[0] for row in cursor.fetchall()}
            yield held

    def estimated_rows(self) -> int | None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.ROW_ESTIMATE_SQL)
            found = cursor.fetchone()
        if found is None or found[0] is None or found[0] < 0:
            return None
        return int(found[0])

    def state_shares(self) -> dict[str, float] | None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.STATE_SHARES_SQL)
            found = cursor.fetchone()
        if found is None or found[0] is None:
            return None
        return dict(zip(found[0], found[1], strict=True))

    @contextlib.contextmanager
    def screen_reads(self) -> Iterator[None]:
        """In one transaction, without JIT (`sql.NO_JIT_SQL`)."""
        with transaction.atomic(using=self.using):
            with self.connection.cursor() as cursor:
                cursor.execute(sql.NO_JIT_SQL)
                [previous, _] = cursor.fetchone()
            yield  # a failure rolls the transaction (or savepoint) back, and the setting with it
            with self.connection.cursor() as cursor:
                cursor.execute(sql.JIT_BACK_SQL, [previous])

    def connection_room(self) -> ConnectionRoom:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.CONNECTION_ROOM_SQL)
            found = cursor.fetchone()
        most, reserved, in_use, superuser, role_limit, role_in_use, db_limit, db_in_use = found
        # Superusers may take the reserved slots, and no role's or database's
        # own limit holds them.
        limits = [ConnectionLimit("max_connections", most - (0 if superuser else reserved), in_use)]
        if not superuser and role_limit >= 0:
            limits.append(ConnectionLimit("the role's CONNECTION LIMIT", role_limit, role_in_use))
        if not superuser and db_limit >= 0:
            limits.append(ConnectionLimit("the database's CONNECTION LIMIT", db_limit, db_in_use))
        return ConnectionRoom(most, tuple(limits))

    def out_of_connections(self, error: BaseException) -> bool:
        """PostgreSQL refuses a connection for want of room before the session
        exists, so libpq's error carries no SQLSTATE, only the server's message
        (in English unless the server's `lc_messages` says otherwise)."""
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, psycopg.OperationalError) and any(
                said in str(cause) for said in sql.OUT_OF_CONNECTIONS
            ):
                return True
            cause = cause.__cause__ or cause.__context__
        return False


def _settle_params(done: Sequence[tuple[Job, Any]]) -> dict[str, Any]:
    """The parallel arrays the settle reads: each attempt's fence and result,
    as array literals. Ids are written as their 32 hex digits, which
    PostgreSQL reads as a UUID as it does the hyphenated form, and Python
    writes in half the time."""
    return {
        "ids": plain_array_literal(job.id.hex for job, _ in done),
        "attempts": plain_array_literal(str(job.attempts) for job, _ in done),
        "leases": plain_array_literal(
            None if job.lease_expires_at is None else job.lease_expires_at.isoformat()
            for job, _ in done
        ),
        "results": array_literal(
            None if result is None else strict_json(result) for _, result in done
        ),
    }


def _insert_many_params(rows: Sequence[NewJob]) -> list[Any]:
    """What `INSERT_MANY_SQL` reads for `rows`: the batch's shared values, then
    its columns as array literals."""
    traceparents = [row.traceparent for row in rows]
    return [
        rows[0].default_max_attempts,
        rows[0].now,
        rows[0].now,
        array_literal(row.kind for row in rows),
        array_literal(row.key for row in rows),
        array_literal(row.payload_json for row in rows),
        plain_array_literal(None if n is None else str(n) for n in (r.max_attempts for r in rows)),
        plain_array_literal(row.run_at.isoformat() for row in rows),
        plain_array_literal(
            None if row.deadline is None else row.deadline.isoformat() for row in rows
        ),
        array_literal(row.queue for row in rows),
        plain_array_literal(str(row.priority) for row in rows),
        # A NULL array when no row has one (tracing absent: the usual batch),
        # which `unnest` pads as NULL for every row.
        array_literal(traceparents) if any(traceparents) else None,
    ]


def _claim_params(admission: Admission, ends: Mapping[str, datetime]) -> dict[str, Any]:
    """What the claim reads: the clock, each kind with its end of lease
    (`lease_ends`) as array literals, the limit, the claiming runner's name,
    the queues it serves (NULL for all) and those paused (an empty array
    for none: the prepared statement's plan is one for every pass)."""
    kind_caps, queues = admission.kind_caps or {}, admission.queues
    kinds = list(ends)
    capped = list(kind_caps)
    return {
        "cap_kinds": array_literal(capped),
        "caps": plain_array_literal(str(kind_caps[kind]) for kind in capped),
        "now": admission.now,
        "runner": admission.runner,
        "kinds": array_literal(kinds),
        "queues": array_literal(queues) if queues else None,
        "paused": array_literal(admission.paused_queues),
        "expires": plain_array_literal(ends[kind].isoformat() for kind in kinds),
        "limit": admission.limit,
    }
