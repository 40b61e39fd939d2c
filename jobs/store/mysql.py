"""MySQL and MariaDB (8.4+ and 10.11+, as Django 6.1 requires): the claim as a
locked read then an update, inside one transaction, and the insert as
`INSERT IGNORE` on the identity constraint, one writer per identity at a time
(see `GET_IDENTITY_LOCK_SQL` for why).

Both databases have `FOR UPDATE SKIP LOCKED`, so concurrent runners skip each
other's rows as on PostgreSQL; neither has `UPDATE ... RETURNING` (MariaDB has
it only for INSERT and DELETE), so the claim reads its candidates, locks them
through the primary key (see `SELECT_READY_SQL` for why), updates them and
reads them back, still holding the locks; a batch settle likewise locks its
rows and reads their fences, then updates them in one statement. Neither
has partial indexes: the identity is the model's `(kind, key, live)` unique
constraint, as everywhere, and migration 0003 adds a plain `(state, run_at)`
index for the claim here.
There is no LISTEN/NOTIFY: runners in other processes find new work at their
next poll, as on SQLite.

`key` is a reserved word, and MySQL reads double quotes as strings unless
ANSI_QUOTES is on, so every identifier here is quoted with backticks.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, OperationalError, transaction

from jobs.models import Job
from jobs.store.base import NewJob
from jobs.store.orm import CONFIGURED_MAX_ATTEMPTS_SQL, OrmStore, with_ids
from jobs.store.rows import (
    CLAIM_COLUMNS,
    Claim,
    claims_from_rows,
    decode_uuid,
    in_run_at_order,
    lease_ends,
    naive_utc_datetime,
    queue_filter,
)

#: MySQL's warning code for a duplicate key: the only one an enqueue ignores.
ER_DUP_ENTRY = 1062

#: How long a write that takes an identity waits for another writer of the
#: same identity (InnoDB's own default lock wait).
IDENTITY_LOCK_SECONDS = 50

#: Take the named lock of each identity, in the order given; 1 each when held.
#: Why: InnoDB checks a unique key by share-locking the matching entries, and
#: a just-released identity still has one (delete-marked until purge), so two
#: writers taking it at once both share-lock it, both try to insert, and one
#: dies in a deadlock that rolls back its caller's whole transaction. Writers
#: of one identity take turns on this lock instead, for one statement each.
GET_IDENTITY_LOCK_SQL = "GET_LOCK(%s, %s)"

#: Release them.
RELEASE_IDENTITY_LOCK_SQL = "RELEASE_LOCK(%s)"

#: The identity of a row a requeue is about to make live again.
IDENTITY_OF_SQL = "SELECT `kind`, `key` FROM jobs_job WHERE `id` = %s"

_COLUMNS = ", ".join(f"`{column}`" for column in CLAIM_COLUMNS)

#: One queued row's values; a spec without its own budget takes the config
#: row's `max_attempts` in the same statement, as on the other databases.
_VALUES = f"""
    (%s, %s, %s, %s, 'queued', 0,
     COALESCE(%s, ({CONFIGURED_MAX_ATTEMPTS_SQL}), %s),
     %s, %s, NULL, '', %s, %s, %s, %s, NULL)
"""

#: Insert queued rows, skipping each whose identity a live row (or an earlier
#: row of the same statement) holds: IGNORE turns the duplicate key on the
#: identity constraint into a warning, so the caller's transaction goes on.
INSERT_SQL = """
    INSERT IGNORE INTO jobs_job (`id`, `kind`, `key`, `payload`, `state`, `attempts`,
                                 `max_attempts`, `run_at`, `deadline`, `lease_expires_at`,
                                 `last_error`, `queue`, `priority`, `created_at`,
                                 `updated_at`, `finished_at`)
    VALUES {values}
"""

#: Which of the given ids exist: after a batch insert, the rows it inserted
#: (the ids are fresh UUIDs, so any found is one of ours).
INSERTED_SQL = "SELECT `id` FROM jobs_job WHERE `id` IN ({ids})"

_READY = """
    `state` IN ('queued', 'running')
    AND `run_at` <= %s
    AND `kind` IN ({kinds}) {queues}
    AND (`state` = 'queued' OR `lease_expires_at` <= %s)
"""

#: The oldest ready rows, run_at first, read without locking anything: the
#: claim's candidates. A locking read over the (state, run_at) index would
#: also lock running rows on its way to the ready ones, and wait on them
#: (MariaDB's SKIP LOCKED does not skip a row reached through a secondary
#: index while another transaction settles it), which deadlocks against a
#: runner settling its batch. So the claim locks by primary key only.
#: One branch per state, each an equality on `state` and a range on
#: `run_at`, so each reads the index in run_at order and stops at its limit;
#: only the two branches' few rows are sorted. `state IN (...)` over the
#: same index read and sorted every ready row (10,000 for a claim of 8 from
#: a backlog of 10,000). The running branch also reads the running rows
#: whose leases are live, older than the expired ones it finds: at most the
#: runners' slots.
#: `FORCE INDEX`: the (state, run_at) index reads live rows only, whatever
#: the statistics say. Left to them, MariaDB read `jobs_job_ready` (run_at
#: over every row, settled ones too, there being no partial index here) for
#: a table new or analyzed empty, or for a backlog a tenth the size of its
#: history, and scanned the whole table once its rows were deleted.
SELECT_READY_SQL = """
    (SELECT `id`, `run_at` FROM jobs_job FORCE INDEX (jobs_job_ready_by_state)
     WHERE `state` = 'queued' AND `run_at` <= %s AND `kind` IN ({kinds}) {queues}
     ORDER BY `run_at` LIMIT %s)
    UNION ALL
    (SELECT `id`, `run_at` FROM jobs_job FORCE INDEX (jobs_job_ready_by_state)
     WHERE `state` = 'running' AND `run_at` <= %s AND `lease_expires_at` <= %s
       AND `kind` IN ({kinds}) {queues}
     ORDER BY `run_at` LIMIT %s)
    ORDER BY `run_at` LIMIT %s
"""

#: Lock those of the given candidates that are still ready, through the
#: primary key, skipping rows another claim or a settle holds; reports each
#: one's state, and the runner and start of the attempt a reclaim takes it
#: from. No ORDER BY or LIMIT here: InnoDB locks every row it reads
#: before sorting, so "the oldest N of these 4N" would lock all 4N and leave
#: a runner claiming beside it nothing but locked rows. The claim instead
#: passes only as many ids as it still wants (see `MySQLStore.claim`).
LOCK_READY_SQL = (
    "SELECT `id`, `state`, `claimed_by`, `started_at` FROM jobs_job FORCE INDEX (PRIMARY)"
    " WHERE `id` IN ({ids}) AND " + _READY + " FOR UPDATE SKIP LOCKED"
)

#: How many candidates a claim reads per row it wants: runners racing for the
#: same oldest rows skip each other's and still find enough.
CANDIDATES_PER_ROW = 4

#: Move the locked rows to running, count the attempt and write each kind's lease.
CLAIM_SQL = """
    UPDATE jobs_job
    SET `state` = 'running', `attempts` = `attempts` + 1,
        `lease_expires_at` = CASE `kind` {lease_cases} END,
        `started_at` = %s, `updated_at` = %s, `claimed_by` = %s
    WHERE `id` IN ({ids})
"""

#: Read the claimed rows back, still under the claim's locks.
CLAIMED_SQL = f"SELECT {_COLUMNS} FROM jobs_job WHERE `id` IN ({{ids}})"

#: A batch settle's first step: lock the batch's rows that are still running,
#: through the primary key, and read each one's fence (attempt and lease), so
#: the one update after it settles exactly the attempts that still own their
#: rows. Two statements a batch instead of one fenced update a job: MySQL's
#: UPDATE cannot say which rows it changed.
LOCK_RUNNING_SQL = (
    "SELECT `id`, `attempts`, `lease_expires_at` FROM jobs_job FORCE INDEX (PRIMARY)"
    " WHERE `id` IN ({ids}) AND `state` = 'running' FOR UPDATE"
)

#: Settle the locked rows the batch still owns `done`, each keeping its result.
COMPLETE_MANY_SQL = """
    UPDATE jobs_job
    SET `state` = 'done', `lease_expires_at` = NULL, `finished_at` = %s, `updated_at` = %s,
        `result` = {result}
    WHERE `id` IN ({ids})
"""


def _placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


def select_ready(
    cursor: Any, at: Any, kinds: Sequence[str], wanted: int, queues: Sequence[str] | None = None
) -> list[Any]:
    """The ids of the `wanted` oldest rows of `kinds` (in `queues`, when given)
    ready at `at` (a prepared datetime), oldest first, as the database gives
    them: nothing is locked."""
    scope = [*kinds, *(queues or ())]
    cursor.execute(
        SELECT_READY_SQL.format(
            kinds=_placeholders(len(kinds)), queues=queue_filter("`queue`", queues)
        ),
        [at, *scope, wanted, at, at, *scope, wanted, wanted],
    )
    return [row[0] for row in cursor.fetchall()]


class MySQLStore(OrmStore):
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
                    INSERTED_SQL.format(ids=_placeholders(len(rows))),
                    [self.prepare("id", row.id) for row in rows],
                )
                found = {decode_uuid(found[0]) for found in cursor.fetchall()}
            return [row.id in found for row in rows]

    def requeue(self, job_id: uuid.UUID, now: datetime) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute(IDENTITY_OF_SQL, [self.prepare("id", job_id)])
            found = cursor.fetchone()
        if found is None:
            return False
        with self._identities_locked([(found[0], found[1])]):
            return super().requeue(job_id, now)

    @contextmanager
    def _identities_locked(self, identities: Iterable[tuple[str, str]]) -> Iterator[None]:
        """Hold the named lock of each `(kind, key)` for the statement inside.

        Named locks belong to the connection, not the transaction, so they
        are released right after the statement, before the caller commits:
        only the unique check and insert are serialised, never the caller's
        work. Taken in one sorted order, so two batches never deadlock.
        """
        database = str(self.connection.settings_dict["NAME"])
        names = sorted(
            {
                "jobs:" + hashlib.sha1(f"{database}\0{kind}\0{key}".encode()).hexdigest()
                for kind, key in identities
            }
        )
        with self.connection.cursor() as cursor:
            cursor.execute(
                "SELECT " + ", ".join([GET_IDENTITY_LOCK_SQL] * len(names)),
                [value for name in names for value in (name, IDENTITY_LOCK_SECONDS)],
            )
            held = cursor.fetchone() or ()
        try:
            if not all(flag == 1 for flag in held):
                raise OperationalError(
                    f"waited {IDENTITY_LOCK_SECONDS} s for another enqueue of the same job"
                )
            yield
        finally:
            # On the driver's own cursor: a refused statement may have marked
            # the caller's atomic block for rollback, and Django would then
            # refuse any query, yet the lock is the connection's to release.
            raw = self.connection.connection.cursor()
            try:
                raw.execute("SELECT " + ", ".join([RELEASE_IDENTITY_LOCK_SQL] * len(names)), names)
            finally:
                raw.close()

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
            ]
        with self.connection.cursor() as cursor:
            cursor.execute(INSERT_SQL.format(values=", ".join([_VALUES] * len(rows))), params)
            inserted = cursor.rowcount
            raw = self.connection.connection
            if raw.warning_count():
                for _level, code, message in raw.show_warnings():
                    if code != ER_DUP_ENTRY:
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
                LOCK_RUNNING_SQL.format(ids=_placeholders(len(ids))),
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
                COMPLETE_MANY_SQL.format(result=result_sql, ids=_placeholders(len(won))),
                [at, at, *result_params, *prepared.values()],
            )
        return set(won)

    def claim(
        self,
        now: datetime,
        leases: Mapping[str, timedelta],
        limit: int,
        runner: str = "",
        queues: Sequence[str] | None = None,
    ) -> list[Claim]:
        if limit < 1 or not leases:
            return []
        kinds = list(leases)
        at = self.prepare("run_at", now)
        ready_params: list[Any] = [at, *kinds, *(queues or ()), at]
        scope = {"kinds": _placeholders(len(kinds)), "queues": queue_filter("`queue`", queues)}
        with self.pass_transaction(), self.runner_cursor() as cursor:
            candidates = select_ready(cursor, at, kinds, limit * CANDIDATES_PER_ROW, queues)
            prior: dict[uuid.UUID, tuple[Any, ...]] = {}
            # Oldest first, a chunk the size of what is still wanted at a time:
            # the rows a chunk finds locked (another runner's claim) or no
            # longer ready are made up from the next chunk.
            while candidates and len(prior) < limit:
                wanted = limit - len(prior)
                chunk, candidates = candidates[:wanted], candidates[wanted:]
                cursor.execute(
                    LOCK_READY_SQL.format(ids=_placeholders(len(chunk)), **scope),
                    [*chunk, *ready_params],
                )
                prior.update((decode_uuid(row[0]), row[1:]) for row in cursor.fetchall())
            if not prior:
                return []
            ids = [self.prepare("id", job_id) for job_id in prior]
            ends = lease_ends(now, leases)
            lease_params: list[Any] = []
            for kind in kinds:
                lease_params += [kind, self.prepare("lease_expires_at", ends[kind])]
            cursor.execute(
                CLAIM_SQL.format(
                    lease_cases=" ".join(["WHEN %s THEN %s"] * len(kinds)),
                    ids=_placeholders(len(ids)),
                ),
                [*lease_params, at, at, runner, *ids],
            )
            cursor.execute(CLAIMED_SQL.format(ids=_placeholders(len(ids))), ids)
            rows = cursor.fetchall()
        claims = claims_from_rows(
            rows,
            lambda job_id: prior[decode_uuid(job_id)],
            now,
            ends,
            using=self.using,
            decode_datetime=naive_utc_datetime,
            runner=runner,
        )
        return in_run_at_order(claims)
