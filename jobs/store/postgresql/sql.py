"""PostgreSQL's statements, each a named constant with its purpose.

The verbs that run them are in `jobs.store.postgresql`; how they are sent
(bound by the server, prepared once per connection) is in `.driver`.
"""

from __future__ import annotations

from jobs.store.orm import CONFIGURED_MAX_ATTEMPTS_SQL
from jobs.store.orm import INSERT_SQL as PORTABLE_INSERT_SQL
from jobs.store.rows import CLAIM_COLUMNS

#: How the runner's pass is planned: once where it is prepared, and the same
#: way whatever the table's statistics say. Set for the pass's own
#: transaction only (`set_config(..., true)`, as `SET LOCAL`), sent with the
#: pass in one message, one round trip (`.planned`): undone when
#: that transaction ends, so nothing is left on the connection for its other
#: statements, nor, behind a transaction-mode pooler, for the other clients
#: that server connection serves next. Set as session settings once per
#: connection, they reached every client of a PgBouncer pool.
#:
#: `plan_cache_mode`: plan each prepared statement once, for every execution.
#: Left to choose, PostgreSQL planned the pass afresh each time (the plan for
#: its arrays of ids looked cheaper with their values known), and planning
#: was a fifth of a pass. (Unprepared, the pass is planned at each
#: execution whatever this says.)
#:
#: `enable_seqscan`, `enable_bitmapscan`, `enable_sort` off: the claim must
#: read the ready rows from `jobs_job_ready` in claim order and stop at its
#: limit, and find every row it updates by primary key. Costed from the
#: statistics it did not whenever they said the table was small (never
#: analyzed, analyzed while empty, all dead rows after a drain and a sweep):
#: a scan of the table and a sort looked cheapest, and that plan, made once,
#: stayed while a burst drained at a fifth of its speed. Off, such a path
#: costs 10^10 more; the index scan of a priority's range is the only way to
#: its ready rows in claim order without a sort, so it wins whatever the
#: statistics say (tests/integration/store/
#: test_claim_plans_postgresql.py). No query shape could do this: to a
#: planner that believes the table empty, every shape's scan costs nothing.
#:
#: `jit` off: a path that is the only one left is still taken, at that cost,
#: which is past every JIT threshold; such a statement (a few rows read with
#: no index to use) was then compiled at each execution, 15 to 90 ms each.
#: The statements here are short, and JIT never pays for itself on them.
#:
#: Settings, not statements: a setting made by a statement applies only to
#: statements planned after it, so they cannot go inside the pass itself as
#: `_NO_FLUSH_WAIT` does (which `COMMIT` reads, after the statement).
PLANNER_SETTINGS = {
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
    "enable_sort": "off",
    "jit": "off",
}
PLANNER_SETTINGS_SQL = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', true)" for name, value in PLANNER_SETTINGS.items()
)

#: The server process this session runs in. Beside the process id the server
#: announced at connect (`psycopg`'s `info.backend_pid`), it tells a direct
#: connection from one through a pooler, which announces an id of its own
#: (`driver.prepares`).
BACKEND_PID_SQL = "SELECT pg_backend_pid()"

#: What the server has room for, for `Store.connection_room`: its
#: `max_connections` less the slots kept for superusers (and, from
#: PostgreSQL 16, for members of `pg_use_reserved_connections`), the client
#: connections open now, and the current role's and database's own
#: `CONNECTION LIMIT` (-1 for none) with their connections open now. Every
#: count includes this session. Superusers are held to none of the limits
#: but `max_connections`. Reads `pg_stat_activity`, whose rows (not their
#: queries) every role sees.
CONNECTION_ROOM_SQL = """
    SELECT current_setting('max_connections')::integer,
           current_setting('superuser_reserved_connections')::integer
             + CASE WHEN EXISTS (SELECT FROM pg_roles
                                 WHERE rolname = 'pg_use_reserved_connections'
                                   AND pg_has_role(current_user, oid, 'MEMBER'))
                    THEN 0
                    ELSE COALESCE(current_setting('reserved_connections', true)::integer, 0)
               END,
           (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'),
           r.rolsuper,
           r.rolconnlimit,
           (SELECT count(*) FROM pg_stat_activity
            WHERE backend_type = 'client backend' AND usesysid = r.oid),
           d.datconnlimit,
           (SELECT count(*) FROM pg_stat_activity
            WHERE backend_type = 'client backend' AND datid = d.oid)
    FROM pg_roles AS r, pg_database AS d
    WHERE r.rolname = current_user AND d.datname = current_database()
"""

#: What PostgreSQL says when it refuses a new connection for want of room:
#: `max_connections` reached, or only its reserved slots left, or a role's or
#: a database's `CONNECTION LIMIT` reached.
OUT_OF_CONNECTIONS = (
    "too many clients already",
    "too many connections for",
    "connection slots are reserved",
)

#: The channel runners LISTEN on.
WAKEUP_CHANNEL = "jobs_wakeup"

#: The portable insert, notifying the channel when it inserted a row. The
#: notice is delivered at commit and dropped on rollback.
INSERT_SQL = f"""
    WITH inserted AS ({PORTABLE_INSERT_SQL})
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
                          queue, priority, created_at, updated_at, finished_at, traceparent)
    SELECT gen_random_uuid(), d.kind, d.key, d.payload, 'queued', 0,
           COALESCE(d.max_attempts, ({CONFIGURED_MAX_ATTEMPTS_SQL}), %s),
           d.run_at, d.deadline, NULL, '', d.queue, d.priority, %s, %s, NULL, d.traceparent
    FROM unnest(%s::text[], %s::text[], %s::jsonb[], %s::integer[],
                %s::timestamptz[], %s::timestamptz[], %s::text[], %s::smallint[], %s::text[])
         AS d(kind, key, payload, max_attempts, run_at, deadline, queue, priority,
              traceparent)
    ON CONFLICT DO NOTHING
    RETURNING id, kind, "key"
"""

#: Wake the listeners when the current transaction commits.
NOTIFY_SQL = f"SELECT pg_notify('{WAKEUP_CHANNEL}', %s)"

#: Subscribe a connection to the channel.
LISTEN_SQL = f"LISTEN {WAKEUP_CHANNEL}"

#: A screen's reads without JIT, for their transaction: the planner costs an
#: hour's range of a 10-million-row table past `jit_above_cost`, and compiling
#: took 70 ms where the aggregate itself took 25 (`Store.screen_reads`).
#: Answers the setting it replaced, which `JIT_BACK_SQL` puts back after
#: (within a caller's own transaction, a savepoint would keep it off).
NO_JIT_SQL = "SELECT current_setting('jit'), set_config('jit', 'off', true)"
JIT_BACK_SQL = "SELECT set_config('jit', %s, true)"

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
#: What the row was before the claim, as one text array: its state, and for
#: a reclaimed row the vanished attempt's runner and start (for its entry in
#: the attempt record). One lookup per row, as the state alone was.
_PRIOR = (
    "(SELECT ARRAY[ready.prior_state, ready.prior_runner, ready.prior_started_at::text]"
    " FROM ready WHERE ready.id = j.id)"
)
#: Commit this statement's transaction without waiting for the WAL flush, a
#: condition every row passes. A runner's pass (its claims and Done settles)
#: waited for the flush of every other client's writes before it: beside a
#: write load on the same server a pass of 8 took ~16 ms. A PostgreSQL crash
#: can forget the last fraction of a second (`wal_writer_delay`, up to three
#: times) of such commits, and then only runs their jobs again (a Done
#: forgotten, or a claim and its attempt), which a handler must allow after
#: any crash; any later commit that waits for the flush (an enqueue, a retry,
#: a retirement) makes every earlier one durable, the WAL being one sequence.
#: Set for the transaction only (`is_local`), so in a runner's autocommit it
#: ends with the statement.
_NO_FLUSH_WAIT = "(SELECT set_config('synchronous_commit', 'off', true)) = 'off'"

#: Settle a batch of attempts `done`, each fenced on its own claim (attempt
#: number and lease), keeping each one's result: one statement for all.
_SETTLE = f"""
    UPDATE jobs_job AS j
    SET state = 'done', lease_expires_at = NULL, finished_at = %(now)s,
        updated_at = %(now)s, result = d.result
    FROM unnest(%(ids)s::uuid[], %(attempts)s::integer[], %(leases)s::timestamptz[],
                %(results)s::jsonb[]) AS d(id, attempts, lease, result)
    WHERE j.id = ANY(%(ids)s::uuid[]) AND j.id = d.id
      AND j.attempts = d.attempts AND j.lease_expires_at = d.lease
      AND {_NO_FLUSH_WAIT}
    RETURNING j.id
"""

#: The priorities live rows hold, highest first, found one index descent
#: each (a loose scan of jobs_job_ready), and only as far as the claim
#: below asks: with most work at one priority that is one or two descents.
#: Reading the index in claim order instead would also read, at every
#: priority, each row queued for later before reaching the next priority:
#: 100,000 future rows read by every idle poll. Each descent lands on its
#: priority's newest entry, a live row (see the index), so it reads one
#: entry; seeking the oldest, it read past every entry a drain had left
#: behind, and a pass of 8 took a tenth longer.
_LEVELS = """
    levels(priority) AS (
        (SELECT priority FROM jobs_job WHERE live ORDER BY priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT lower.priority FROM jobs_job AS lower
                WHERE lower.live AND lower.priority < levels.priority
                ORDER BY lower.priority DESC LIMIT 1)
        FROM levels WHERE levels.priority IS NOT NULL
    )
"""

#: Lock up to N ready rows, skipping rows another claim holds, in claim
#: order: priority by priority (`_LEVELS`, the nested loop keeping its
#: order), and within one the oldest run_at, then the oldest row. At each
#: priority the range on run_at serves both kinds of ready row from the
#: jobs_job_ready index, read backwards for oldest first (`live` is its
#: condition, which the planner must see here to use it): a running row's
#: run_at is in the past too. The levels
#: are walked lazily, so the walk stops at the priority that fills the
#: claim. Used as a MATERIALIZED CTE so it runs exactly once: as a subquery
#: the planner may rescan it inside a join, and each rescan can lock more
#: rows than LIMIT.
_READY = """
    SELECT level.* FROM levels CROSS JOIN LATERAL (
        SELECT id, state AS prior_state, claimed_by AS prior_runner,
               started_at AS prior_started_at, kind, priority, run_at, created_at
        FROM jobs_job
        WHERE live AND priority = levels.priority AND state IN ('queued', 'running')
          AND run_at <= %(now)s
          AND kind = ANY(%(kinds)s::text[])
          AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
          AND NOT queue = ANY(%(paused)s::text[])
          AND (state = 'queued' OR lease_expires_at <= %(now)s)
          {also}
        ORDER BY run_at, created_at
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS level
    LIMIT %(limit)s
"""

#: The locked rows a claim under kinds' caps (`jobs.store.limits`) takes: of
#: each capped kind, at most its cap, the first in claim order; the rest stay
#: queued and are let go at commit.
_CAPPED = """
    capped AS (
        SELECT ranked.id FROM (
            SELECT ready.id, cap.n AS cap,
                   row_number() OVER (PARTITION BY ready.kind
                                      ORDER BY ready.priority DESC, ready.run_at,
                                               ready.created_at) AS nth
            FROM ready
            LEFT JOIN unnest(%(cap_kinds)s::text[], %(caps)s::integer[]) AS cap(kind, n)
              ON cap.kind = ready.kind
        ) AS ranked
        WHERE ranked.cap IS NULL OR ranked.nth <= ranked.cap
    )
"""


def _claim(source: str) -> str:
    """Move the locked rows of `source` (a CTE of ids) to running, count the
    attempt, write each kind's lease and the claiming runner's name,
    reporting what each row was before."""
    return f"""
    UPDATE jobs_job AS j
    SET state = 'running',
        attempts = j.attempts + 1,
        lease_expires_at = {_LEASE_OF_KIND},
        started_at = %(now)s,
        updated_at = %(now)s,
        claimed_by = %(runner)s
    WHERE j.id = ANY(ARRAY(SELECT id FROM {source})) AND {_NO_FLUSH_WAIT}
    RETURNING {_RETURNING}, {_PRIOR}
"""


COMPLETE_MANY_SQL = _SETTLE

_CLAIM_READY = f"WITH RECURSIVE {_LEVELS}, ready AS MATERIALIZED ({_READY.format(also='')})"
CLAIM_SQL = f"{_CLAIM_READY} {_claim('ready')}"
CLAIM_CAPPED_SQL = f"{_CLAIM_READY}, {_CAPPED} {_claim('capped')}"

#: A runner's whole pass in one statement and one commit: settle the attempts
#: that ended Done, then claim up to N ready rows, never one being settled
#: here. Rows come back tagged: 'settled' with only an id, or 'claimed' with
#: the claim's columns and the state the row was in before.
_SETTLE_AND_CLAIM = """
    WITH RECURSIVE settled AS ({settle}),
    {levels},
    ready AS MATERIALIZED ({ready}),{capped}
    claimed AS ({claim})
    SELECT 'claimed' AS tag, claimed.* FROM claimed
    UNION ALL
    SELECT 'settled', settled.id, {nulls} FROM settled
"""


def _settle_and_claim(capped: bool) -> str:
    return _SETTLE_AND_CLAIM.format(
        settle=_SETTLE,
        levels=_LEVELS,
        ready=_READY.format(also="AND id <> ALL(%(ids)s::uuid[])"),
        capped=f" {_CAPPED}," if capped else "",
        claim=_claim("capped" if capped else "ready"),
        nulls=", ".join(["NULL"] * len(CLAIM_COLUMNS)),
    )


SETTLE_AND_CLAIM_SQL = _settle_and_claim(capped=False)
#: The same, with kinds' caps (`CLAIM_CAPPED_SQL`).
SETTLE_AND_CLAIM_CAPPED_SQL = _settle_and_claim(capped=True)

#: The first key of every advisory lock this project takes, so its gates never
#: meet another application's advisory locks ("jobs" in ASCII).
ADVISORY_LOCK_CLASS = 0x6A6F6273

#: Of the given kinds, those whose gate this transaction could take at once
#: (`Store.gated`): an advisory lock per kind, held to the transaction's end.
#: Two kinds whose names hash alike share a gate, which only serialises them.
GATES_SQL = f"""
    SELECT kind FROM unnest(%s::text[]) AS kind
    WHERE pg_try_advisory_xact_lock({ADVISORY_LOCK_CLASS}, hashtext(kind))
"""

#: The longest this transaction waits for a lock (a renewal's: see
#: `RENEW_SQL`); `is_local`, so it ends with the transaction.
LOCK_TIMEOUT_SQL = "SELECT set_config('lock_timeout', %s, true)"

#: Renew the leases of running attempts, each fenced on its claim (attempt
#: number and lease, as the settles are), and the counted attempts of limited
#: kinds among them, skipping every row another session holds a lock on
#: rather than waiting for it: one locked row (an operator's cancel, a
#: `SELECT ... FOR UPDATE` in the project's code) used to hold the renewal
#: of every other. Rows come back as (id, renewed): false for a row whose
#: attempt still owns it (as the statement's snapshot saw it) but that was
#: locked, to be tried again at the next heartbeat. The lock is taken on
#: the row's latest version, with the fence checked again there, so a row
#: cancelled or taken since the snapshot is never renewed.
RENEW_SQL = """
    WITH fence AS MATERIALIZED (
        SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::integer[], %(leases)s::timestamptz[])
             AS f(id, attempts, lease)
    ),
    owned AS (
        SELECT j.id FROM jobs_job AS j JOIN fence ON fence.id = j.id
        WHERE j.id = ANY(%(ids)s::uuid[])
          AND j.attempts = fence.attempts AND j.lease_expires_at = fence.lease
    ),
    mine AS (
        SELECT j.id FROM jobs_job AS j
        WHERE j.id = ANY(%(ids)s::uuid[])
          AND (j.id, j.attempts, j.lease_expires_at) IN (SELECT id, attempts, lease FROM fence)
        FOR UPDATE SKIP LOCKED
    ),
    renewed AS (
        UPDATE jobs_job AS j SET lease_expires_at = %(until)s
        WHERE j.id = ANY(ARRAY(SELECT id FROM mine))
        RETURNING j.id
    ),
    counted AS (
        UPDATE jobs_limitedattempt AS s SET lease_expires_at = %(until)s
        WHERE s.job_id = ANY(ARRAY(
            SELECT c.job_id FROM jobs_limitedattempt AS c
            WHERE c.job_id = ANY(%(limited)s::uuid[])
              AND c.job_id = ANY(ARRAY(SELECT id FROM renewed))
            FOR UPDATE SKIP LOCKED
        ))
    )
    SELECT id, true FROM renewed
    UNION ALL
    SELECT id, false FROM owned WHERE id <> ALL(ARRAY(SELECT id FROM renewed))
"""

#: The server's clock now (not the transaction's start, as `now()` is).
CLOCK_SQL = "SELECT clock_timestamp()"
