"""PostgreSQL: the claim as one statement with `FOR UPDATE SKIP LOCKED`, and
wake-up across processes with LISTEN/NOTIFY.

Concurrent runners skip each other's locked rows instead of queueing on them,
which is what lets many `runjobs` processes on many machines share one table.
Every enqueue notifies a channel inside its own statement, so the notice goes
out when (and only if) the enqueuing transaction commits, and every listening
runner wakes; the claim still gives each row to one of them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import DataError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.pq import Format
from psycopg.types.json import Jsonb

from jobs import log
from jobs.models import Job
from jobs.spec import strict_json
from jobs.store.base import CLAIM_COLUMNS, Claim, NewJob, Store, in_run_at_order, lease_ends

#: Never reached by a count: with prepared statements on, only the statements
#: this store asks for are prepared, never Django's own queries.
_PREPARE_ONLY_WHEN_ASKED = 2**31

#: Plan each prepared statement once, for every execution. Left to choose,
#: PostgreSQL planned the pass afresh each time (the plan for its arrays of
#: ids looked cheaper with their values known), and planning was ~20% of a
#: pass of 8. Only prepared statements follow this setting, and on these
#: connections only this store's statements are prepared (Django's cursors
#: bind on the client); a session setting, it lasts as long as the connection.
GENERIC_PLANS_SQL = "SET plan_cache_mode = force_generic_plan"

#: The channel runners LISTEN on.
WAKEUP_CHANNEL = "jobs_wakeup"

#: The portable insert, notifying the channel when it inserted a row. The
#: notice is delivered at commit and dropped on rollback.
INSERT_SQL = f"""
    WITH inserted AS ({Store.INSERT_SQL})
    SELECT id, pg_notify('{WAKEUP_CHANNEL}', '') FROM inserted
"""

#: Insert many queued rows from parallel arrays; a spec without its own budget
#: takes the config row's, as in the single insert. Rows whose identity is
#: held (by a live row, or by an earlier row of the same batch) are skipped;
#: each inserted row answers with its identity, which names one row of the
#: batch (the first to claim it). Ids are the database's own random UUIDs
#: (version 4, as `uuid.uuid4` makes): nobody reads them back, and making
#: them in Python was a third of `enqueue_many`'s own time per spec.
INSERT_MANY_SQL = f"""
    INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts,
                          run_at, deadline, lease_expires_at, last_error,
                          created_at, updated_at, finished_at)
    SELECT gen_random_uuid(), d.kind, d.key, d.payload, 'queued', 0,
           COALESCE(d.max_attempts, ({Store.CONFIGURED_MAX_ATTEMPTS_SQL}), %s),
           d.run_at, d.deadline, NULL, '', %s, %s, NULL
    FROM unnest(%s::text[], %s::text[], %s::jsonb[], %s::integer[],
                %s::timestamptz[], %s::timestamptz[])
         AS d(kind, key, payload, max_attempts, run_at, deadline)
    ON CONFLICT DO NOTHING
    RETURNING kind, "key"
"""

#: Rows per statement of `insert_many`. The statements go out in one pipeline,
#: so PostgreSQL inserts one while Python writes the arrays of the next: an
#: `enqueue_many` of 5,000 measured ~25,000 jobs/s in chunks of 500 or 1,000
#: against ~22,700 as one statement, on a day the statement alone ran 28,800.
INSERT_MANY_CHUNK = 1_000

#: Wake the listeners when the current transaction commits.
NOTIFY_SQL = f"SELECT pg_notify('{WAKEUP_CHANNEL}', %s)"

#: Subscribe a connection to the channel.
LISTEN_SQL = f"LISTEN {WAKEUP_CHANNEL}"

#: The job table's row count as ANALYZE (or autovacuum) last saw it; -1 or
#: NULL when never analysed. Reads one catalogue row, scans nothing.
ROW_ESTIMATE_SQL = "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass('jobs_job')"

#: The state column's most common values with their frequencies, as ANALYZE
#: last saw them; no row, or NULLs, before it has.
STATE_SHARES_SQL = """
    SELECT most_common_vals::text::text[], most_common_freqs
    FROM pg_stats
    WHERE schemaname = current_schema() AND tablename = 'jobs_job' AND attname = 'state'
"""

#: How long the listener blocks before checking whether to stop, and the
#: longest it waits between reconnection attempts.
LISTEN_TICK_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 5.0

_RETURNING = ", ".join(f'j."{column}"' for column in CLAIM_COLUMNS)

# Every statement that updates rows named by a list finds them through the
# primary key (`id = ANY(array)`), never a join or a partial index the planner
# could scan whole when its statistics lag a burst of new rows. So the batch
# settles fence on the lease alone, with the attempt number: only a running
# row has a lease (every settle clears it, every claim writes a new one), so
# `lease_expires_at = <the claim's lease>` already means "still running under
# this claim", and leaving `state = 'running'` out keeps the ready index, which
# that condition would make eligible, out of the plan.
_LEASE_OF_KIND = (
    "(SELECT lease.expires FROM unnest(%(kinds)s::text[], %(expires)s::timestamptz[])"
    " AS lease(kind, expires) WHERE lease.kind = j.kind)"
)
_PRIOR_STATE = "(SELECT ready.prior_state FROM ready WHERE ready.id = j.id)"

#: Settle a batch of attempts `done`, each fenced on its own claim (attempt
#: number and lease), keeping each one's result: one statement for all.
_SETTLE = """
    UPDATE jobs_job AS j
    SET state = 'done', lease_expires_at = NULL, finished_at = %(now)s,
        updated_at = %(now)s, result = d.result
    FROM unnest(%(ids)s::uuid[], %(attempts)s::integer[], %(leases)s::timestamptz[],
                %(results)s::jsonb[]) AS d(id, attempts, lease, result)
    WHERE j.id = ANY(%(ids)s::uuid[]) AND j.id = d.id
      AND j.attempts = d.attempts AND j.lease_expires_at = d.lease
    RETURNING j.id
"""

#: Lock up to N ready rows, skipping rows another claim holds, oldest run_at
#: first. The range on run_at serves both kinds of ready row from the
#: jobs_job_ready index (`live` is its condition, which the planner must see
#: here to use it): a running row's run_at is in the past too. Used as a
#: MATERIALIZED CTE so it runs exactly once: as a subquery the planner may
#: rescan it inside a join, and each rescan can lock more rows than LIMIT.
_READY = """
    SELECT id, state AS prior_state
    FROM jobs_job
    WHERE live AND state IN ('queued', 'running')
      AND run_at <= %(now)s
      AND kind = ANY(%(kinds)s::text[])
      AND (state = 'queued' OR lease_expires_at <= %(now)s)
      {also}
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

#: Move the locked rows to running, count the attempt and write each kind's
#: lease, reporting what state each row was in before.
_CLAIM = f"""
    UPDATE jobs_job AS j
    SET state = 'running',
        attempts = j.attempts + 1,
        lease_expires_at = {_LEASE_OF_KIND},
        started_at = %(now)s,
        updated_at = %(now)s
    WHERE j.id = ANY(ARRAY(SELECT id FROM ready))
    RETURNING {_RETURNING}, {_PRIOR_STATE}
"""

COMPLETE_MANY_SQL = _SETTLE

CLAIM_SQL = f"WITH ready AS MATERIALIZED ({_READY.format(also='')}) {_CLAIM}"

#: A runner's whole pass in one statement and one commit: settle the attempts
#: that ended Done, then claim up to N ready rows, never one being settled
#: here. Rows come back tagged: 'settled' with only an id, or 'claimed' with
#: the claim's columns and the state the row was in before.
SETTLE_AND_CLAIM_SQL = f"""
    WITH settled AS ({_SETTLE}),
    ready AS MATERIALIZED ({_READY.format(also="AND id <> ALL(%(ids)s::uuid[])")}),
    claimed AS ({_CLAIM})
    SELECT 'claimed' AS tag, claimed.* FROM claimed
    UNION ALL
    SELECT 'settled', settled.id, {", ".join(["NULL"] * len(CLAIM_COLUMNS))} FROM settled
"""


class _PreparingCursor(psycopg.Cursor[Any]):
    """psycopg's server-binding cursor, preparing every statement it runs:
    what `_fetch` hands to Django's cursor wrapper, which cannot pass `prepare`."""

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Any:
        return super().execute(
            query, params, prepare=True if prepare is None else prepare, binary=binary
        )


#: Connections on which `GENERIC_PLANS_SQL` has been run.
_PLANNING_ONCE: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()

_TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid
#: psycopg's own timestamptz loader (its C one where psycopg has its binary
#: part). Django wraps it in a Python loader that sets each value's tzinfo to
#: the connection's zone; where that zone is UTC and so is the session's,
#: psycopg's loader already gives the same value, and a claim of 64 rows
#: decodes ~2.5 us faster per date without the wrapper.
_TIMESTAMPTZ_LOADER = psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)


class PostgreSQLStore(Store):
    INSERT_SQL = INSERT_SQL
    wakes_other_processes = True

    def _cursor(self, *, plan_once: bool = False, claimed_rows: bool = False) -> Any:
        """A cursor for one of this store's hot statements: Django's wrapper
        around a psycopg cursor that binds on the server.

        Parameters are bound by the server, not quoted into the text on the
        client as Django's cursors do: a pass names every id it settles, and
        quoting those arrays in Python, then parsing them in PostgreSQL, cost
        more than the work. And the statement is prepared once per connection
        (and, with `plan_once`, planned once: see `GENERIC_PLANS_SQL`), unless
        `settings.JOBS_PREPARED_STATEMENTS` is False: needed only behind a
        transaction-mode pooler that cannot keep prepared statements
        (PgBouncer before 1.21). It still runs through Django's cursor wrapper,
        so its errors are Django's `DatabaseError`, execute wrappers see it,
        and DEBUG's query log (and `CaptureQueriesContext`) lists it.

        With `claimed_rows`, for a claim's result, its dates load through
        `_TIMESTAMPTZ_LOADER` (see `_fetch` for the values that do not load).
        """
        connection = self.connection  # one lookup: each is a thread-local read
        connection.ensure_connection()
        raw = connection.connection
        prepare = bool(getattr(settings, "JOBS_PREPARED_STATEMENTS", True))
        if prepare and raw.prepare_threshold is None:
            # A new connection: Django turns preparing off for all of it.
            raw.prepare_threshold = _PREPARE_ONLY_WHEN_ASKED
        if prepare and plan_once and raw not in _PLANNING_ONCE:
            with connection.wrap_database_errors:
                raw.execute(GENERIC_PLANS_SQL)
            _PLANNING_ONCE.add(raw)
        driver_cursor = (_PreparingCursor if prepare else psycopg.Cursor)(raw)
        if (
            claimed_rows
            and _TIMESTAMPTZ_LOADER is not None
            and connection.timezone is UTC
            and raw.pgconn.parameter_status(b"TimeZone") == b"UTC"
        ):
            driver_cursor.adapters.register_loader(_TIMESTAMPTZ_OID, _TIMESTAMPTZ_LOADER)
        wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
        # Typed as taking Django's own wrapper; at run time any DB-API cursor.
        return wrap(cast(Any, driver_cursor))

    def _fetch(
        self,
        sql: str,
        params: Mapping[str, Any] | Sequence[Any],
        *,
        plan_once: bool = False,
        claimed_rows: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Run one of this store's hot statements (see `_cursor`) and return its rows.

        With `claimed_rows`, a value the driver cannot load (a date written by
        hand as `infinity`, which no datetime holds, in a table whose check
        from migration 0006 was dropped) comes back as its text
        instead of failing the whole result: the claim has already committed
        its rows as running, and must hand each one back (see `claim_from_row`).
        """
        with self._cursor(plan_once=plan_once, claimed_rows=claimed_rows) as cursor:
            cursor.execute(sql, params)
            try:
                rows: list[tuple[Any, ...]] = cursor.fetchall()
            except DataError:
                if not claimed_rows:
                    raise
                rows = _rows_as_far_as_they_load(cursor.cursor)
            return rows

    def insert(self, row: NewJob) -> bool:
        """The portable insert, bound by the server and prepared (see `_fetch`):
        quoting ten values on the client was most of an enqueue's own time."""
        params = [
            row.id,
            row.kind,
            row.key,
            Jsonb(row.payload_json, dumps=_already_json),
            row.max_attempts,
            row.default_max_attempts,
            row.run_at,
            row.deadline,
            row.now,
            row.now,
        ]
        return bool(self._fetch(self.INSERT_SQL, params))

    def notify(self, payload: str = "") -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(NOTIFY_SQL, [payload])

    def insert_many(self, rows: Sequence[NewJob]) -> list[bool]:
        """A statement per `INSERT_MANY_CHUNK` rows, all sent in one pipeline
        inside one transaction, then one notice if anything was inserted.

        Each statement's columns are array literals (see `_settle_params`).
        The statements run in order, so a row refused for an identity an
        earlier chunk took is refused as it would be inside one statement; a
        statement that fails rolls back every chunk with it.
        """
        if not rows:
            return []
        chunks = [rows[n : n + INSERT_MANY_CHUNK] for n in range(0, len(rows), INSERT_MANY_CHUNK)]
        queued = [False] * len(rows)
        with transaction.atomic(using=self.using), contextlib.ExitStack() as cursors:
            connection = self.connection
            connection.ensure_connection()
            with connection.wrap_database_errors, connection.connection.pipeline():
                sent = []
                for chunk in chunks:
                    cursor = cursors.enter_context(self._cursor())
                    cursor.execute(INSERT_MANY_SQL, _insert_many_params(chunk))
                    sent.append(cursor)
                # Written while PostgreSQL inserts: which row each identity names.
                first: dict[tuple[str, str], int] = {}
                for n, row in enumerate(rows):
                    first.setdefault((row.kind, row.key), n)
                for cursor in sent:
                    for kind, key in cursor.fetchall():
                        queued[first[kind, key]] = True
            if any(queued):
                self.notify()
        return queued

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        if not done:
            return set()
        rows = self._fetch(COMPLETE_MANY_SQL, {"now": now, **_settle_params(done)}, plan_once=True)
        return {row[0] for row in rows}

    def estimated_rows(self) -> int | None:
        with self.connection.cursor() as cursor:
            cursor.execute(ROW_ESTIMATE_SQL)
            found = cursor.fetchone()
        if found is None or found[0] is None or found[0] < 0:
            return None
        return int(found[0])

    def state_shares(self) -> dict[str, float] | None:
        with self.connection.cursor() as cursor:
            cursor.execute(STATE_SHARES_SQL)
            found = cursor.fetchone()
        if found is None or found[0] is None:
            return None
        return dict(zip(found[0], found[1], strict=True))

    def listen(self, ring: Callable[[str], None], stopping: threading.Event) -> None:
        params = plain_connection_params(self.connection)
        delay = LISTEN_TICK_SECONDS
        while not stopping.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as listener:
                    listener.execute(LISTEN_SQL)
                    log.event("runner_listening", channel=WAKEUP_CHANNEL)
                    delay = LISTEN_TICK_SECONDS
                    ring("")  # anything queued while nobody was listening
                    while not stopping.is_set():
                        for notice in listener.notifies(timeout=LISTEN_TICK_SECONDS):
                            ring(notice.payload)
            except psycopg.Error as error:
                log.event(
                    "runner_listener_lost",
                    logging.WARNING,
                    outcome="reconnecting",
                    error=str(error).strip(),
                    retry_in_seconds=delay,
                )
                stopping.wait(delay)
                delay = min(delay * 2, RECONNECT_MAX_SECONDS)

    def settle_and_claim(
        self,
        done: Sequence[tuple[Job, Any]],
        now: datetime,
        leases: Mapping[str, timedelta],
        limit: int,
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        if not done or limit < 1 or not leases:
            return super().settle_and_claim(done, now, leases, limit)
        ends = lease_ends(now, leases)
        params = {**_claim_params(now, ends, limit), **_settle_params(done)}
        rows = self._fetch(SETTLE_AND_CLAIM_SQL, params, plan_once=True, claimed_rows=True)
        won = {row[1] for row in rows if row[0] == "settled"}
        claims = [
            self.claim_from_row(row[1:-1], row[-1] == "running", now, ends)
            for row in rows
            if row[0] == "claimed"
        ]
        return won, in_run_at_order(claims)

    def claim(self, now: datetime, leases: Mapping[str, timedelta], limit: int) -> list[Claim]:
        if limit < 1 or not leases:
            return []
        ends = lease_ends(now, leases)
        params = _claim_params(now, ends, limit)
        rows = self._fetch(CLAIM_SQL, params, plan_once=True, claimed_rows=True)
        claims = [self.claim_from_row(row[:-1], row[-1] == "running", now, ends) for row in rows]
        return in_run_at_order(claims)


def plain_connection_params(connection: BaseDatabaseWrapper) -> dict[str, Any]:
    """What `psycopg.connect` needs to reach the database `connection` reaches,
    without the cursor class, adapters context and preparing policy Django
    sets up for its own use: for a connection of one's own (the listener's, a
    benchmark's raw baseline)."""
    return {
        key: value
        for key, value in connection.get_connection_params().items()
        if key not in ("cursor_factory", "context", "prepare_threshold")
    }


def _rows_as_far_as_they_load(cursor: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
    """The cursor's result with each value loaded as its column's type, or left
    as its text where the driver refuses it. The slow path, for a result that
    failed to load as a whole: each value on its own."""
    result = cursor.pgresult
    if result is None:
        return []
    column_loaders = []
    for column in range(result.nfields):
        oid = result.ftype(column)
        loader_class = cursor.adapters.get_loader(oid, Format(result.fformat(column)))
        column_loaders.append(None if loader_class is None else loader_class(oid, cursor))
    encoding = cursor.connection.info.encoding
    rows = []
    for number in range(result.ntuples):
        row: list[Any] = []
        for column, loader in enumerate(column_loaders):
            data = result.get_value(number, column)
            if data is None:
                row.append(None)
                continue
            try:
                if loader is not None:
                    row.append(loader.load(data))
                    continue
            except psycopg.DataError:
                pass
            row.append(bytes(data).decode(encoding, errors="replace"))
        rows.append(tuple(row))
    return rows


def _settle_params(done: Sequence[tuple[Job, Any]]) -> dict[str, Any]:
    """The parallel arrays `_SETTLE` reads: each attempt's fence and result.

    Written as array literals here rather than handed to psycopg as lists:
    its list dumper inspects every element's type on every call, which cost
    the runner's pass more than its database round trip. The statement casts
    each literal to its array type, so a malformed one is refused, not guessed.
    Ids are written as their 32 hex digits, which PostgreSQL reads as a UUID
    as it does the hyphenated form, and Python writes in half the time.
    """
    return {
        "ids": _plain_array_literal(job.id.hex for job, _ in done),
        "attempts": _plain_array_literal(str(job.attempts) for job, _ in done),
        "leases": _plain_array_literal(
            None if job.lease_expires_at is None else job.lease_expires_at.isoformat()
            for job, _ in done
        ),
        "results": _array_literal(
            None if result is None else strict_json(result) for _, result in done
        ),
    }


def _insert_many_params(rows: Sequence[NewJob]) -> list[Any]:
    """What `INSERT_MANY_SQL` reads for `rows`: the batch's shared values, then
    its columns as array literals (see `_settle_params`)."""
    return [
        rows[0].default_max_attempts,
        rows[0].now,
        rows[0].now,
        _array_literal(row.kind for row in rows),
        _array_literal(row.key for row in rows),
        _array_literal(row.payload_json for row in rows),
        _plain_array_literal(None if n is None else str(n) for n in (r.max_attempts for r in rows)),
        _plain_array_literal(row.run_at.isoformat() for row in rows),
        _plain_array_literal(
            None if row.deadline is None else row.deadline.isoformat() for row in rows
        ),
    ]


def _already_json(text: str) -> str:
    """For `Jsonb`: the payload is JSON text already, checked by `JobSpec.validate`."""
    return text


def _plain_array_literal(items: Iterable[str | None]) -> str:
    """`_array_literal` for items that need no quoting: the text of UUIDs,
    integers and ISO timestamps has no comma, quote, brace, backslash or space."""
    return "{" + ",".join("NULL" if item is None else item for item in items) + "}"


def _array_literal(items: Iterable[str | None]) -> str:
    """A PostgreSQL array literal of `items`, each quoted (None is NULL)."""
    quoted = (
        "NULL" if item is None else '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for item in items
    )
    return "{" + ",".join(quoted) + "}"


def _claim_params(now: datetime, ends: Mapping[str, datetime], limit: int) -> dict[str, Any]:
    """What `_READY` and `_CLAIM` read: the clock, each kind with its end of
    lease (`lease_ends`), the limit.

    The arrays are literals, for the reason `_settle_params` gives.
    """
    kinds = list(ends)
    return {
        "now": now,
        "kinds": _array_literal(kinds),
        "expires": _plain_array_literal(ends[kind].isoformat() for kind in kinds),
        "limit": limit,
    }
