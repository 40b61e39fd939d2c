"""MySQL and MariaDB (8.4+ and 10.11+, as Django 6.1 requires): the claim as a
locked read then an update, inside one transaction, and the insert as
`INSERT IGNORE` on the identity constraint, one writer per identity at a time
(see `.sql.GET_IDENTITY_LOCK_SQL` for why).

Both databases have `FOR UPDATE SKIP LOCKED`, so concurrent runners skip each
other's rows as on PostgreSQL; neither has `UPDATE ... RETURNING` (MariaDB has
it only for INSERT and DELETE), so the claim reads its candidates, locks them
through the primary key (see `.sql.SELECT_READY_SQL` for why), updates them and
reads them back, still holding the locks; a batch settle likewise locks its
rows and reads their fences, then updates them in one statement. Neither
has partial indexes: the identity is the model's `(kind, key, live)` unique
constraint, as everywhere, and migrations 0003 and 0010 add a plain
`(state, priority, run_at, created_at)` index for the claim here.
There is no LISTEN/NOTIFY: runners in other processes find new work at their
next poll, as on SQLite.

The verbs are here; their statements in `.sql`.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, OperationalError, transaction

from jobs.models import Job
from jobs.store.admission import Admission
from jobs.store.base import (
    RENEW_LOCK_TIMEOUT,
    ConnectionLimit,
    ConnectionRoom,
    NewJob,
    Renewal,
)
from jobs.store.mysql import sql
from jobs.store.mysql.ready import _chunk, select_ready
from jobs.store.orm import OrmStore, with_ids
from jobs.store.rows import (
    Claim,
    claims_from_rows,
    decode_uuid,
    naive_utc_datetime,
    placeholders,
)


class MySQLStore(OrmStore):
    #: In the choice of candidates to lock (`_chunk`).
    applies_kind_caps = True

    """Its own insert and claim; a requeue takes its identity's named lock."""

    def insert(self, row: NewJob) -> bool:
        with self._identities_locked([(row.kind, row.key)]):
            return bool(self._insert([row]))

    def insert_many(self, rows: Sequence[NewJob]) -> list[bool]:
        if not rows:
            return []
        rows = with_ids(rows)
        with (
            transaction.atomic(using=self.using),
            self._identities_locked((row.kind, row.key) for row in rows),
        ):
            inserted = self._insert(rows)
            if inserted == len(rows):
                return [True] * len(rows)
            if not inserted:
                return [False] * len(rows)
            with self.connection.cursor() as cursor:
                cursor.execute(
                    sql.INSERTED_SQL.format(ids=placeholders(len(rows))),
                    [self.prepare("id", row.id) for row in rows],
                )
                found = {decode_uuid(found[0]) for found in cursor.fetchall()}
            return [row.id in found for row in rows]

    def connection_room(self) -> ConnectionRoom:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.CONNECTION_ROOM_SQL)
            most, per_user, user_in_use = cursor.fetchone()
            cursor.execute(sql.THREADS_CONNECTED_SQL)
            in_use = int(cursor.fetchone()[1])
        limits = [ConnectionLimit("max_connections", most, in_use)]
        if per_user > 0:
            limits.append(ConnectionLimit("max_user_connections", per_user, user_in_use))
        return ConnectionRoom(most, tuple(limits))

    def out_of_connections(self, error: BaseException) -> bool:
        """The driver's error, or Django's made from it, whose code says so."""
        cause: BaseException | None = error
        while cause is not None:
            if (
                type(cause).__name__ == "OperationalError"
                and cause.args
                and cause.args[0] in sql.OUT_OF_CONNECTIONS
            ):
                return True
            cause = cause.__cause__ or cause.__context__
        return False

    def requeue(self, job_id: uuid.UUID, now: datetime) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.IDENTITY_OF_SQL, [self.prepare("id", job_id)])
            found = cursor.fetchone()
        if found is None:
            return False
        with self._identities_locked([(found[0], found[1])]):
            return super().requeue(job_id, now)

    @contextmanager
    def gated(self, kinds: Sequence[str]) -> Iterator[set[str]]:
        """A named lock per kind, tried without waiting. Named locks belong to the
        connection, not the transaction, so each is let go only after the
        transaction has ended (committed or not), never before its rows are
        visible to the next claim of the kind."""
        names = {kind: self._lock_name("jobs:limit:", kind) for kind in kinds}
        held: set[str] = set()
        if names:
            with self.connection.cursor() as cursor:
                cursor.execute(
                    "SELECT " + ", ".join([sql.TRY_GATE_SQL] * len(names)), list(names.values())
                )
                flags = cursor.fetchone() or ()
            held = {kind for kind, flag in zip(names, flags, strict=True) if flag == 1}
        try:
            with transaction.atomic(using=self.using):
                yield held
        finally:
            self._release([names[kind] for kind in held])

    def _lock_name(self, prefix: str, *parts: str) -> str:
        """A named lock's name: `prefix` (what it guards), then a digest of this
        database and `parts`; within MySQL's 64 characters."""
        database = str(self.connection.settings_dict["NAME"])
        return prefix + hashlib.sha1("\0".join([database, *parts]).encode()).hexdigest()

    def _release(self, names: Sequence[str]) -> None:
        """Let go of named locks this connection holds. On the driver's own cursor:
        a refused statement may have marked the caller's atomic block for
        rollback, and Django would then refuse any query, yet the locks are
        the connection's to release."""
        if not names:
            return
        raw = self.connection.connection.cursor()
        try:
            raw.execute("SELECT " + ", ".join([sql.RELEASE_IDENTITY_LOCK_SQL] * len(names)), names)
        finally:
            raw.close()

    @contextmanager
    def _identities_locked(self, identities: Iterable[tuple[str, str]]) -> Iterator[None]:
        """Hold the named lock of each `(kind, key)` for the statement inside.

        Named locks belong to the connection, not the transaction, so they
        are released right after the statement, before the caller commits:
        only the unique check and insert are serialised, never the caller's
        work. Taken in one sorted order, so two batches never deadlock.
        """
        names = sorted({self._lock_name("jobs:", kind, key) for kind, key in identities})
        with self.connection.cursor() as cursor:
            cursor.execute(
                "SELECT " + ", ".join([sql.GET_IDENTITY_LOCK_SQL] * len(names)),
                [value for name in names for value in (name, sql.IDENTITY_LOCK_SECONDS)],
            )
            held = cursor.fetchone() or ()
        try:
            if not all(flag == 1 for flag in held):
                raise OperationalError(
                    f"waited {sql.IDENTITY_LOCK_SECONDS} s for another enqueue of the same job"
                )
            yield
        finally:
            self._release(names)

    def _insert(self, rows: Sequence[NewJob]) -> int:
        """Insert `rows` in one statement; how many were inserted.

        IGNORE would also quietly truncate bad data, so any warning other than
        the duplicate identity is raised: only a held identity is a False.
        """
        params: list[Any] = []
        for row in rows:
            params += [
                self.prepare("id", row.id),
                row.kind,
                row.key,
                self.prepare("payload", row.payload),
                row.max_attempts,
                row.default_max_attempts,
                self.prepare("run_at", row.run_at),
                self.prepare("deadline", row.deadline),
                row.queue,
                row.priority,
                self.prepare("created_at", row.now),
                self.prepare("updated_at", row.now),
                row.traceparent,
            ]
        with self.connection.cursor() as cursor:
            cursor.execute(
                sql.INSERT_SQL.format(values=", ".join([sql.VALUES_SQL] * len(rows))), params
            )
            inserted = cursor.rowcount
            raw = self.connection.connection
            if raw.warning_count():
                for _level, code, message in raw.show_warnings():
                    if code != sql.ER_DUP_ENTRY:
                        raise DatabaseError(f"enqueue refused by MySQL: {message}")
        return int(inserted)

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        """Two statements for the batch, on the runner's own cursor: through the
        ORM, one fenced update per job was logged under DEBUG and cost a round
        trip each."""
        if not done:
            return set()
        # A batch can hold two attempts of one job (a stale one and the owner):
        # each is matched to the row by its whole fence, never by id alone.
        results = {(job.id, job.attempts, job.lease_expires_at): result for job, result in done}
        ids = list(dict.fromkeys(job.id for job, _ in done))
        with self.pass_transaction(), self.runner_cursor() as cursor:
            cursor.execute(
                sql.LOCK_RUNNING_SQL.format(ids=placeholders(len(ids))),
                [self.prepare("id", job_id) for job_id in ids],
            )
            fences = [
                (decode_uuid(row[0]), row[1], naive_utc_datetime(row[2]))
                for row in cursor.fetchall()
            ]
            won = {fence[0]: results[fence] for fence in fences if fence in results}
            if not won:
                return set()
            prepared = {job_id: self.prepare("id", job_id) for job_id in won}
            result_sql, result_params = self.results_case(
                [((prepared[job_id],), result) for job_id, result in won.items()],
                "`id` = %s",
                "`result`",
            )
            at = self.prepare("finished_at", now)
            cursor.execute(
                sql.COMPLETE_MANY_SQL.format(result=result_sql, ids=placeholders(len(won))),
                [at, at, *result_params, *prepared.values()],
            )
        return set(won)

    def renew(self, jobs: Sequence[Job], until: datetime, limited: Sequence[uuid.UUID]) -> Renewal:
        """The rows still owned, read once without a lock and once locking with
        `SKIP LOCKED`, then one update for the rows locked (and one for their
        counted attempts), all under a lock wait of `RENEW_LOCK_TIMEOUT`."""
        if not jobs:
            return Renewal(frozenset())
        fences = {(job.id, job.attempts, job.lease_expires_at) for job in jobs}
        ids = [self.prepare("id", job.id) for job in jobs]

        def owned(statement: str) -> set[uuid.UUID]:
            cursor.execute(statement.format(ids=placeholders(len(ids))), ids)
            rows = [(decode_uuid(r[0]), r[1], naive_utc_datetime(r[2])) for r in cursor.fetchall()]
            return {row[0] for row in rows if row in fences}

        with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            # In whole seconds, at least one.
            cursor.execute(sql.LOCK_WAIT_SQL, [max(1, round(RENEW_LOCK_TIMEOUT.total_seconds()))])
            try:
                seen, mine = owned(sql.RUNNING_FENCES_SQL), owned(sql.LOCK_RUNNING_SKIP_LOCKED_SQL)
                at = self.prepare("lease_expires_at", until)
                for statement, chosen in (
                    (sql.RENEW_SQL, list(mine)),
                    (sql.RENEW_COUNTED_SQL, [job_id for job_id in limited if job_id in mine]),
                ):
                    if chosen:
                        keys = [self.prepare("id", job_id) for job_id in chosen]
                        cursor.execute(statement.format(ids=placeholders(len(keys))), [at, *keys])
            finally:
                with contextlib.suppress(DatabaseError):
                    cursor.execute(sql.LOCK_WAIT_RESTORED_SQL)
        return Renewal(renewed=frozenset(mine), held=frozenset(seen - mine))

    def database_now(self) -> datetime | None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.CLOCK_SQL)
            return cursor.fetchone()[0].replace(tzinfo=UTC)  # type: ignore[no-any-return]

    def claim(self, admission: Admission) -> list[Claim]:
        if admission.empty:
            return []
        limit = admission.limit
        at, ready_params, scope = self.ready_scope(admission, "`queue`")
        with self.pass_transaction(), self.runner_cursor() as cursor:
            candidates = select_ready(
                cursor,
                at,
                list(admission.leases),
                limit * sql.CANDIDATES_PER_ROW,
                admission.queues,
                admission.paused_queues,
            )
            prior: dict[uuid.UUID, tuple[Any, ...]] = {}
            rooms = dict(admission.kind_caps or {})
            # In claim order, a chunk the size of what is still wanted at a
            # time: the rows a chunk finds locked (another runner's claim) or
            # no longer ready are made up from the next chunk. A capped kind
            # takes at most its room; its rows past that are passed over.
            while candidates and len(prior) < limit:
                chunk, candidates = _chunk(candidates, limit - len(prior), rooms)
                if not chunk:
                    break
                cursor.execute(
                    sql.LOCK_READY_SQL.format(ids=placeholders(len(chunk)), **scope),
                    [*(job_id for job_id, _ in chunk), *ready_params],
                )
                locked = {row[0]: row[1:] for row in cursor.fetchall()}
                for job_id, kind in chunk:
                    if job_id not in locked and kind in rooms:
                        rooms[kind] += 1  # not taken after all: its room is back
                prior.update((decode_uuid(job_id), row) for job_id, row in locked.items())
            if not prior:
                return []
            ids = [self.prepare("id", job_id) for job_id in prior]
            ends, lease_cases, lease_params = self.lease_cases(admission)
            cursor.execute(
                sql.CLAIM_SQL.format(lease_cases=lease_cases, ids=placeholders(len(ids))),
                [*lease_params, at, at, admission.runner, *ids],
            )
            cursor.execute(sql.CLAIMED_SQL.format(ids=placeholders(len(ids))), ids)
            rows = cursor.fetchall()
        return claims_from_rows(
            rows,
            lambda job_id: prior[decode_uuid(job_id)],
            admission,
            ends,
            using=self.using,
            decode_datetime=naive_utc_datetime,
        )
