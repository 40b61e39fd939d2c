"""MySQL's and MariaDB's statements, each a named constant with its purpose;
the verbs that run them are in `jobs.store.mysql`.

`key` is a reserved word, and MySQL reads double quotes as strings unless
ANSI_QUOTES is on, so every identifier here is quoted with backticks.
"""

from __future__ import annotations

from jobs.store.orm import CONFIGURED_MAX_ATTEMPTS_SQL
from jobs.store.rows import CLAIM_COLUMNS

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
VALUES_SQL = f"""
    (%s, %s, %s, %s, 'queued', 0,
     COALESCE(%s, ({CONFIGURED_MAX_ATTEMPTS_SQL}), %s),
     %s, %s, NULL, '', %s, %s, %s, %s, NULL, %s)
"""

#: Insert queued rows, skipping each whose identity a live row (or an earlier
#: row of the same statement) holds: IGNORE turns the duplicate key on the
#: identity constraint into a warning, so the caller's transaction goes on.
INSERT_SQL = """
    INSERT IGNORE INTO jobs_job (`id`, `kind`, `key`, `payload`, `state`, `attempts`,
                                 `max_attempts`, `run_at`, `deadline`, `lease_expires_at`,
                                 `last_error`, `queue`, `priority`, `created_at`,
                                 `updated_at`, `finished_at`, `traceparent`)
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

#: The next priority below `%s` that queued rows hold: one descent of the
#: (state, priority, run_at) index. The candidates are read a priority at a
#: time, highest first, each by a range on run_at, so rows queued for later
#: are never read (reading the index in its own order would read every one
#: of them, at every priority, before the next priority's).
_NEXT_LEVEL = """
    (SELECT `priority` FROM jobs_job FORCE INDEX (jobs_job_ready_by_state)
     WHERE `state` = 'queued' AND `priority` < %s ORDER BY `priority` DESC LIMIT 1)
"""

#: One step of the claim's candidate read, without locking anything: the
#: oldest ready rows of the next priority (`_NEXT_LEVEL`, which the last
#: branch names, NULL when there is none) and, in the first step only, the
#: running rows whose leases expired, in claim order. A locking read over
#: the (state, ...) index would also lock running rows on its way to the
#: ready ones, and wait on them (MariaDB's SKIP LOCKED does not skip a row
#: reached through a secondary index while another transaction settles
#: it), which deadlocks against a runner settling its batch. So the claim
#: locks by primary key only.
#: Each branch is an equality on `state` (and on `priority`), then a range
#: on `run_at`, so it reads the index in claim order and stops at its
#: limit; only the branches' few rows are sorted. `state IN (...)` over the
#: same index read and sorted every ready row (10,000 for a claim of 8 from
#: a backlog of 10,000). The running branch also reads the running rows
#: whose leases are live: at most the runners' slots.
#: `FORCE INDEX`: the (state, ...) index reads live rows only, whatever the
#: statistics say. Left to them, MariaDB read `jobs_job_ready` (every row,
#: settled ones too, there being no partial index here) for a table new or
#: analyzed empty, or for a backlog a tenth the size of its history, and
#: scanned the whole table once its rows were deleted.
SELECT_READY_SQL = f"""
    (SELECT `id`, `priority`, `run_at`, `created_at`, `kind` FROM jobs_job
     FORCE INDEX (jobs_job_ready_by_state)
     WHERE `state` = 'queued' AND `priority` = {_NEXT_LEVEL} AND `run_at` <= %s
       AND `kind` IN ({{kinds}}) {{queues}}
     ORDER BY `run_at`, `created_at` LIMIT %s)
    {{running}}
    UNION ALL
    (SELECT NULL, {_NEXT_LEVEL}, NULL, NULL, NULL)
"""

#: `SELECT_READY_SQL`'s branch for the running rows whose leases expired.
EXPIRED_SQL = """
    UNION ALL
    (SELECT `id`, `priority`, `run_at`, `created_at`, `kind` FROM jobs_job
     FORCE INDEX (jobs_job_ready_by_state)
     WHERE `state` = 'running' AND `run_at` <= %s AND `lease_expires_at` <= %s
       AND `kind` IN ({kinds}) {queues}
     ORDER BY `priority` DESC, `run_at`, `created_at` LIMIT %s)
"""

#: Above every priority a row can hold (`jobs.spec.PRIORITY_MAX`).
ABOVE_ALL = 1 << 15

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

#: Take a kind's gate (`Store.gated`) if no other connection holds it: a named
#: lock, 1 when taken, tried without waiting (timeout 0).
TRY_GATE_SQL = "GET_LOCK(%s, 0)"

#: A renewal's lock wait (`Store.renew`): the session's own is kept and put
#: back after, since both MySQL and MariaDB set it for the session only.
LOCK_WAIT_SQL = (
    "SET @jobs_lock_wait = @@SESSION.innodb_lock_wait_timeout, "
    "SESSION innodb_lock_wait_timeout = %s"
)
LOCK_WAIT_RESTORED_SQL = "SET SESSION innodb_lock_wait_timeout = @jobs_lock_wait"

#: The fences (attempt and lease) of the given rows still running: read
#: without a lock (what the renewal was given that still owns its row), then
#: under a lock skipping the rows another session holds (what it renews).
#: Through the primary key, as the claim's locks are.
RUNNING_FENCES_SQL = (
    "SELECT `id`, `attempts`, `lease_expires_at` FROM jobs_job FORCE INDEX (PRIMARY)"
    " WHERE `id` IN ({ids}) AND `state` = 'running'"
)
LOCK_RUNNING_SKIP_LOCKED_SQL = RUNNING_FENCES_SQL + " FOR UPDATE SKIP LOCKED"

#: Write the renewed lease on the locked rows, and on their counted attempts.
RENEW_SQL = "UPDATE jobs_job SET `lease_expires_at` = %s WHERE `id` IN ({ids})"
RENEW_COUNTED_SQL = (
    "UPDATE jobs_limitedattempt SET `lease_expires_at` = %s WHERE `job_id` IN ({ids})"
)

#: The server's clock now, in UTC (the column type Django gives dates here).
CLOCK_SQL = "SELECT UTC_TIMESTAMP(6)"

#: What the server allows this session's account (`Store.connection_room`):
#: `max_connections`, the account's own `max_user_connections` (the session's
#: value is the account's limit where it has one; 0 for none), and the
#: connections of this account's user open now, this one included (without
#: the PROCESS privilege a session sees only its own user's threads, which are
#: the ones this counts).
CONNECTION_ROOM_SQL = """
    SELECT @@GLOBAL.max_connections, @@max_user_connections,
           (SELECT COUNT(*) FROM information_schema.PROCESSLIST
            WHERE `USER` = SUBSTRING_INDEX(CURRENT_USER(), '@', 1))
"""

#: The client connections open on the server now, this one included.
THREADS_CONNECTED_SQL = "SHOW GLOBAL STATUS LIKE 'Threads_connected'"

#: The server's errors for a connection refused for want of room: too many
#: connections, the account's `max_user_connections` (as a variable, and as
#: an account's resource limit).
OUT_OF_CONNECTIONS = (1040, 1203, 1226)
