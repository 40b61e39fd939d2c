"""SQLite: the claim under an immediate transaction, WAL mode on.

SQLite has one writer at a time, so `BEGIN IMMEDIATE` (the project's
`transaction_mode`) serialises claims: the select and the conditional update
below see the same rows and no other writer can come between them. The update
repeats the ready condition, so it stays correct even without the lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobs.models import Job
from jobs.store.admission import Admission
from jobs.store.orm import OrmStore
from jobs.store.rows import (
    CLAIM_COLUMNS,
    DATETIME_COLUMNS,
    Claim,
    claims_from_rows,
    decode_uuid,
    placeholders,
    text_datetime,
)

# `+kind` keeps SQLite from answering the kind filter through the identity
# index (then sorting every live row): without statistics it would prefer it.
# `live = 1` is the ready index's condition, written as Django writes it
# there: SQLite uses a partial index only for a query that repeats it.
_READY = """
    live = 1 AND state IN ('queued', 'running')
    AND run_at <= %s
    AND +kind IN ({kinds}) {queues}
    AND (state = 'queued' OR lease_expires_at <= %s)
"""

#: The next priority below `%s` that live rows hold: one descent of the
#: ready index. The claim walks the priorities this way, highest first, and
#: reads each one's ready rows by a range on run_at, so rows queued for
#: later are never read (reading the index in its own order would read
#: every one of them, at every priority, before the next priority's).
NEXT_LEVEL_SQL = (
    "SELECT priority FROM jobs_job INDEXED BY jobs_job_ready"
    " WHERE live = 1 AND priority < %s ORDER BY priority DESC LIMIT 1"
)

#: One priority's ready rows in claim order (oldest run_at, then oldest
#: row), with the state each is in, and the runner and start of the attempt
#: a reclaim takes it from.
SELECT_READY_SQL = (
    "SELECT id, state, claimed_by, CAST(started_at AS TEXT) FROM jobs_job"
    " INDEXED BY jobs_job_ready WHERE priority = %s AND "
    + _READY
    + " ORDER BY run_at, created_at LIMIT %s"
)

#: Above every priority a row can hold (`jobs.spec.PRIORITY_MAX`).
_ABOVE_ALL = 1 << 15

#: Move the chosen rows to running, count the attempt and write each kind's
#: lease, only where they are still ready.
CLAIM_SQL = (
    "UPDATE jobs_job SET state = 'running', attempts = attempts + 1, "
    "lease_expires_at = CASE kind {lease_cases} END, started_at = %s, updated_at = %s, "
    "claimed_by = %s "
    "WHERE id IN ({ids}) AND "
    + _READY
    + " RETURNING "
    + ", ".join(
        # Dates come back as text, past the driver's converters: a date written
        # by hand that does not parse must reach `claim_from_row` (and be
        # retired), not raise inside the claim and stop the runner every pass.
        f'CAST("{c}" AS TEXT)' if c in DATETIME_COLUMNS else f'"{c}"'
        for c in CLAIM_COLUMNS
    )
)


#: Settle a batch `done`, each row fenced on its own claim (attempt number and
#: lease), keeping each non-null result; reports the rows that settled. The
#: `id IN` list finds the rows through the primary key, the row values fence.
COMPLETE_MANY_SQL = """
    UPDATE jobs_job
    SET state = 'done', lease_expires_at = NULL, finished_at = %s, updated_at = %s,
        result = {result}
    WHERE id IN ({ids}) AND state = 'running'
      AND (id, attempts, lease_expires_at) IN (VALUES {fences})
    RETURNING id
"""


class SQLiteStore(OrmStore):
    """The portable insert and settles, with a claim and a batch settle of its own."""

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        """One statement for the batch: through the ORM, one fenced update per
        row was most of a runner's pass on SQLite."""
        if not done:
            return set()
        ids = [self.prepare("id", job.id) for job, _ in done]
        fences = [
            (job_id, job.attempts, self.prepare("lease_expires_at", job.lease_expires_at))
            for job_id, (job, _) in zip(ids, done, strict=True)
        ]
        result_sql, result_params = self.results_case(
            [(fence, result) for fence, (_, result) in zip(fences, done, strict=True)],
            "(id, attempts, lease_expires_at) = (%s, %s, %s)",
            "result",
        )
        at = self.prepare("finished_at", now)
        params: list[Any] = [at, at, *result_params, *ids]
        for fence in fences:
            params += fence
        sql = COMPLETE_MANY_SQL.format(
            result=result_sql,
            ids=placeholders(len(ids)),
            fences=", ".join(["(%s, %s, %s)"] * len(done)),
        )
        with self.pass_transaction(), self.runner_cursor() as cursor:
            cursor.execute(sql, params)
            return {decode_uuid(row[0]) for row in cursor.fetchall()}

    def claim(self, admission: Admission) -> list[Claim]:
        if admission.empty:
            return []
        limit = admission.limit
        at, ready_params, scope = self.ready_scope(admission, "+queue")
        with self.pass_transaction(), self.runner_cursor() as cursor:
            prior: dict[str, tuple[Any, ...]] = {}
            level: int | None = _ABOVE_ALL
            while len(prior) < limit:
                cursor.execute(NEXT_LEVEL_SQL, [level])
                found = cursor.fetchone()
                if found is None:
                    break
                level = found[0]
                cursor.execute(
                    SELECT_READY_SQL.format(**scope), [level, *ready_params, limit - len(prior)]
                )
                prior.update((str(row[0]), row[1:]) for row in cursor.fetchall())
            if not prior:
                return []
            ends, lease_cases, lease_params = self.lease_cases(admission)
            sql = CLAIM_SQL.format(lease_cases=lease_cases, ids=placeholders(len(prior)), **scope)
            cursor.execute(sql, [*lease_params, at, at, admission.runner, *prior, *ready_params])
            rows = cursor.fetchall()
        return claims_from_rows(
            rows,
            lambda job_id: prior[decode_uuid(job_id).hex],
            admission,
            ends,
            using=self.using,
            decode_datetime=text_datetime,
        )
