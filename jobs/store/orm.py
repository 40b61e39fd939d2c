"""The verbs written once for every database, which each vendor's store extends.

Plain single-row updates, each through the ORM: the fenced settles (`_owned`
fences every one on id, `running`, the attempt number and the lease, and each
answers whether it won; an error's text is written storable, a NUL or a lone
surrogate escaped, so no message can fail its settle), the operator verbs, the
claim of an `abandon` owed and the sweep's prune. Also the insert in the upsert
syntax PostgreSQL and SQLite share, the one statement here the ORM cannot say
(an insert that skips a held identity and reports whether it wrote); MySQL
writes its own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from jobs import history
from jobs.config import BOUNDS
from jobs.models import LIVE_STATES, SETTLED_ROWS, SETTLED_STATES, Job, JobsConfig, State
from jobs.storable import storable_text
from jobs.store import workflows
from jobs.store.admission import Admission
from jobs.store.base import NewJob, Store
from jobs.store.rows import Claim, lease_ends, placeholders, queue_filter, queue_params

_ATTEMPTS = BOUNDS["max_attempts"]

#: The config row's `max_attempts` when it is usable, else NULL: every
#: vendor's insert reads it in the same statement.
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
#: The traceparent is NULL unless the enqueue ran in a span (`jobs.tracing`).
INSERT_SQL = f"""
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts,
                              run_at, deadline, lease_expires_at, last_error,
                              queue, priority, created_at, updated_at, finished_at,
                              traceparent)
        VALUES (%s, %s, %s, %s, 'queued', 0,
                COALESCE(CAST(%s AS integer), ({CONFIGURED_MAX_ATTEMPTS_SQL}), %s),
                %s, %s, NULL, '', %s, %s, %s, %s, NULL, %s)
        ON CONFLICT DO NOTHING
        RETURNING id
    """


class OrmStore(Store):
    """`Store`'s verbs as every database runs them, unless its vendor overrides one."""

    def pass_transaction(self) -> Any:
        """The transaction of one step of a runner's pass (a claim, a batch settle):
        its own when alone, and no savepoint of its own inside `settle_and_claim`'s,
        which it fails with. Each savepoint was two more statements a pass, and
        two more lines in DEBUG's query log."""
        return transaction.atomic(using=self.using, savepoint=False)

    def ready_scope(
        self, admission: Admission, column: str
    ) -> tuple[Any, list[Any], dict[str, str]]:
        """For a claim written by hand (SQLite's, MySQL's): `now` prepared, the
        ready condition's parameters (`now`, the admission's kinds and queues
        as `queue_params` orders them, `now`) and the `{kinds}` and `{queues}`
        conditions they fill (`column` names the queue column)."""
        at = self.prepare("run_at", admission.now)
        kinds, queues, paused = admission.leases, admission.queues, admission.paused_queues
        scope = {"kinds": placeholders(len(kinds)), "queues": queue_filter(column, queues, paused)}
        return at, [at, *kinds, *queue_params(queues, paused), at], scope

    def lease_cases(self, admission: Admission) -> tuple[dict[str, datetime], str, list[Any]]:
        """For a claim written by hand: each kind's end of lease (`lease_ends`),
        and the `CASE kind` arms that write it, with their parameters."""
        ends = lease_ends(admission.now, admission.leases)
        params: list[Any] = []
        for kind, end in ends.items():
            params += [kind, self.prepare("lease_expires_at", end)]
        return ends, " ".join(["WHEN %s THEN %s"] * len(ends)), params

    def results_case(
        self, pairs: Sequence[tuple[Sequence[Any], Any]], match: str, column: str
    ) -> tuple[str, list[Any]]:
        """A batch settle's SET value for `column`: each `(match params, result)`
        pair whose result is not None written to the row `match` (SQL with
        placeholders for those params) picks out, every other row keeping what
        it holds; the SQL and its parameters. A batch can hold two attempts of
        one job (a stale one and its owner), so `match` names the attempt where
        the statement could otherwise give the row the stale one's result."""
        with_result = [(key, result) for key, result in pairs if result is not None]
        if not with_result:
            return column, []
        params: list[Any] = []
        for key, result in with_result:
            params += [*key, self.prepare("result", result)]
        whens = " ".join([f"WHEN {match} THEN %s"] * len(with_result))
        return f"CASE {whens} ELSE {column} END", params

    # -- enqueue -------------------------------------------------------------

    def insert(self, row: NewJob) -> bool:
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
            row.queue,
            row.priority,
            prepare("created_at", row.now),
            prepare("updated_at", row.now),
            row.traceparent,
        ]
        with self.connection.cursor() as cursor:
            cursor.execute(INSERT_SQL, params)
            return cursor.fetchone() is not None

    def insert_many(self, rows: Sequence[NewJob]) -> list[bool]:
        """Here one insert per row inside one transaction (one commit); vendors
        with a bulk form override it."""
        with transaction.atomic(using=self.using):
            return [self.insert(row) for row in with_ids(rows)]

    # -- the runner's pass ---------------------------------------------------

    def settle_and_claim(
        self, done: Sequence[tuple[Job, Any]], admission: Admission
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        if not done:
            return set(), self.claim(admission)
        with transaction.atomic(using=self.using):
            won = self.complete_many(done, admission.now)
            return won, self.claim(admission)

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
        fields: dict[str, Any] = {"result": result} if result is not None else {}
        return bool(
            self._owned(job).update(
                state=State.DONE, lease_expires_at=None, finished_at=now, updated_at=now, **fields
            )
        )

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        won = set()
        with self.pass_transaction():
            for job, result in done:
                if self.complete(job, now, result):
                    won.add(job.id)
        return won

    def note(self, job: Job, entry: history.Entry) -> bool:
        return self._settle_recorded(job, entry)

    def retry(
        self, job: Job, now: datetime, run_at: datetime, error: str, entry: history.Entry
    ) -> bool:
        return self._settle_recorded(
            job,
            entry,
            state=State.QUEUED,
            run_at=run_at,
            lease_expires_at=None,
            last_error=storable_text(error),
            updated_at=now,
        )

    def retire(
        self,
        job: Job,
        now: datetime,
        error: str,
        entry: history.Entry,
        state: str = State.FAILED,
    ) -> bool:
        return self._settle_recorded(
            job,
            entry,
            state=state,
            lease_expires_at=None,
            last_error=storable_text(error),
            finished_at=now,
            updated_at=now,
            abandon_owed_at=now,
        )

    def _settle_recorded(self, job: Job, entry: history.Entry, **columns: Any) -> bool:
        """The fenced update of `columns` on the row `job`'s attempt owns, with
        `entry` appended to its attempt record (`job.errors` too, when it won).

        The record is the one `job` holds: a claim reads it with the row, and
        while the attempt owns the row nobody else writes it (a cancel or a
        reclaim takes the row from it first, and this update then loses). So
        no database needs SQL of its own for it, and a retry costs one
        statement, as before the record.
        """
        errors = history.appended(job.errors, entry)
        won = self._owned(job).update(errors=errors, **columns)
        if won:
            job.errors = errors
        return bool(won)

    def reschedule(self, job: Job, now: datetime, run_at: datetime) -> bool:
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
        rows = Job.objects.using(self.using).filter(id=job_id, state=State.QUEUED)
        return bool(rows.update(run_at=now, updated_at=now))

    def cancel(self, job_id: uuid.UUID, now: datetime, reason: str) -> Job | None:
        jobs = Job.objects.using(self.using)
        job = jobs.select_for_update().filter(id=job_id, state__in=LIVE_STATES).first()
        if job is None:
            return None
        running = job.state == State.RUNNING
        errors = history.appended(
            job.errors,
            history.record(
                attempt=job.attempts if running else None,
                started_at=job.started_at if running else None,
                ended_at=now,
                runner=job.claimed_by if running else "",
                outcome=history.Outcome.CANCELLED,
                error=reason,
            ),
        )
        jobs.filter(id=job_id, state__in=LIVE_STATES).update(
            state=State.CANCELLED,
            lease_expires_at=None,
            last_error=reason,
            errors=errors,
            finished_at=now,
            updated_at=now,
            abandon_owed_at=now,
        )
        job.errors, job.abandon_owed_at = errors, now
        return job

    def note_action(self, job_id: uuid.UUID, entry: history.Entry) -> bool:
        jobs = Job.objects.using(self.using).filter(id=job_id)
        job = jobs.select_for_update().only("id", "errors").first()
        if job is None:
            return False
        return bool(jobs.update(errors=history.appended(job.errors, entry)))

    def requeue(self, job_id: uuid.UUID, now: datetime) -> bool:
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
                abandon_owed_at=None,
            )
        )

    # -- the debt of an `abandon` call ---------------------------------------

    def claim_abandon(self, job_id: uuid.UUID) -> bool:
        owed = Job.objects.using(self.using).filter(id=job_id, abandon_owed_at__isnull=False)
        return bool(owed.update(abandon_owed_at=None))

    def owed_abandons(self, kinds: Sequence[str], before: datetime, limit: int) -> list[Job]:
        owed = Job.objects.using(self.using).filter(
            abandon_owed_at__isnull=False, abandon_owed_at__lt=before, kind__in=kinds
        )
        return list(owed.order_by("abandon_owed_at")[:limit])

    # -- maintenance ---------------------------------------------------------

    def prune(self, before: datetime, limit: int) -> int:
        """Settled rows older than `before`, never a step of a workflow that
        still has a live step (which may read it: `dependency_results`); a
        workflow's own rows go with the last of its jobs."""
        jobs = Job.objects.using(self.using)
        rows = list(
            jobs.filter(SETTLED_ROWS, finished_at__lt=before)
            .exclude(workflow_id__in=workflows.live_workflows(self.using))
            .order_by("finished_at")
            .values_list("id", "workflow_id")[:limit]
        )
        if not rows:
            return 0
        ids = [job_id for job_id, _ in rows]
        deleted, _ = jobs.filter(id__in=ids, state__in=SETTLED_STATES).delete()
        if in_workflows := {workflow_id for _, workflow_id in rows if workflow_id is not None}:
            workflows.forget(self.using, ids, in_workflows)
        return deleted


def with_ids(rows: Sequence[NewJob]) -> Sequence[NewJob]:
    """`rows`, each without an id given a random (version 4) UUID, as `uuid.uuid4`
    makes them, from one read of the system's randomness rather than one each."""
    missing = [row for row in rows if row.id is None]
    randomness = os.urandom(16 * len(missing))
    for n, row in enumerate(missing):
        row.id = uuid.UUID(bytes=randomness[16 * n : 16 * n + 16], version=4)
    return rows
