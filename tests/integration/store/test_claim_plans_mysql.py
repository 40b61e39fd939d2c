"""The MySQL/MariaDB claim's reading of ready rows, whatever InnoDB believes
about jobs_job.

The claim reads its candidates (`jobs.store.mysql.ready.select_ready`) one state, and for queued
rows one priority, at a time from the (state, priority, run_at, created_at)
index, each read stopping at its limit. Read as one
`state IN ('queued', 'running')` range, MariaDB read and sorted every ready
row instead: 10,000 for a claim of 8 from a backlog of 10,000. Here rows read
are counted with the session's handler counters, around that one statement.

The tests that set a statistics state commit (TRUNCATE and ANALYZE TABLE
commit implicitly), and turn off InnoDB's automatic recalculation for the
table while they run: it re-analyzes a table once a tenth of its rows have
changed, so the state under test would not stay the one named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper

from jobs.models import Job, State
from jobs.store.admission import Admission
from jobs.store.mysql.ready import select_ready
from jobs.store.mysql.sql import CANDIDATES_PER_ROW, EXPIRED_SQL, SELECT_READY_SQL
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "mysql",
        reason="about MySQL's and MariaDB's claim plan; runs on MySQL/MariaDB",
    ),
    pytest.mark.django_db,
]

#: Ready rows waiting: enough that reading them all costs far more than a claim.
BACKLOG = 10_000

#: Months of history kept, in settled rows.
MANY_SETTLED = 100_000

#: A claim of 8 reads this many candidates.
WANTED = 8 * CANDIDATES_PER_ROW

#: Handler counters that count index entries read: one seek (`key`) per
#: branch and per descent to the next priority, then one step (`next`) per
#: further row.
INDEX_READS = (
    "Handler_read_key",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_first",
    "Handler_read_last",
)

#: Index seeks a statement of `jobs.store.mysql.ready.select_ready` makes at most: one a branch, and
#: up to two for each of the two reads of the next priority (as MariaDB's
#: counters show them).
SEEKS = 6

#: Every row read, the union's few rows read back from its temporary table
#: included (about three reads each): far below a backlog, whatever its size.
MOST_ROWS_READ = 4 * WANTED + 8


@pytest.fixture
def statistics_held() -> Iterator[None]:
    """A new jobs_job (TRUNCATE makes one, statistics and all) whose statistics
    change only when a test says so; InnoDB's default put back after."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job STATS_AUTO_RECALC = 0")
        cursor.execute("TRUNCATE TABLE jobs_job")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE TABLE jobs_job")
            cursor.execute("ALTER TABLE jobs_job STATS_AUTO_RECALC = DEFAULT")


def _analyze(cursor: CursorWrapper) -> None:
    cursor.execute("ANALYZE TABLE jobs_job")
    cursor.fetchall()


def _never_analyzed(cursor: CursorWrapper, at: Any, past: Any) -> None:
    """A new install: nothing has analyzed the table."""


def _analyzed_empty(cursor: CursorWrapper, at: Any, past: Any) -> None:
    """A drained queue, analyzed then: the statistics say it is empty."""
    _analyze(cursor)


def _analyzed_among_many_settled(cursor: CursorWrapper, at: Any, past: Any) -> None:
    """History kept: the statistics say almost no row is live."""
    _rows(cursor, MANY_SETTLED, "done", past, "settled")
    _rows(cursor, 20, "queued", at, "waiting")
    _analyze(cursor)


def _deleted_rows(cursor: CursorWrapper, at: Any, past: Any) -> None:
    """A drained backlog, settled and deleted (as a prune does)."""
    _rows(cursor, BACKLOG, "queued", at, "drained")
    cursor.execute("UPDATE jobs_job SET `state` = 'done', `finished_at` = %s", [at])
    cursor.execute("DELETE FROM jobs_job")


STATISTICS: dict[str, Callable[[CursorWrapper, Any, Any], None]] = {
    "never analyzed": _never_analyzed,
    "analyzed empty": _analyzed_empty,
    "analyzed among 100,000 settled rows": _analyzed_among_many_settled,
    "deleted rows": _deleted_rows,
}


@pytest.mark.django_db(transaction=True)  # TRUNCATE and ANALYZE TABLE commit implicitly
@pytest.mark.parametrize("statistics", list(STATISTICS))
def test_a_claim_of_8_from_a_backlog_of_10000_reads_a_few_dozen_rows_whatever_the_statistics(
    store, statistics_held, statistics
):
    """The claim's reading must cost what the claim takes, not what waits: a
    burst after an outage is when claims must be quickest. `FORCE INDEX`
    leaves the optimizer one index and no other access path, and with
    `state` (and `priority`) equal to one value that index gives run_at
    order, so no statistics state can bring back a scan or a sort."""
    at = store.prepare("run_at", T0)
    with connection.cursor() as cursor:
        STATISTICS[statistics](cursor, at, store.prepare("run_at", T0 - timedelta(days=1)))
        _rows(cursor, BACKLOG, "queued", at, "backlog", step_ms=1)

        plan = _explain(cursor, at)
        reads, candidates = _counted(cursor, lambda: select_ready(cursor, at, [KIND], WANTED))

    for line in plan:
        assert (line["key"], line["type"] in ("range", "ref")) == (
            "jobs_job_ready_by_state",
            True,
        ), f"{statistics}: each branch reads a range of the (state, priority, ...) index:\n{plan}"
        assert "filesort" not in (line["Extra"] or ""), (
            f"{statistics}: the index gives each state's rows in run_at order, unsorted:\n{plan}"
        )
    assert len(candidates) == WANTED, f"{statistics}: the claim found its candidates"
    index_reads = sum(reads[name] for name in INDEX_READS)
    assert index_reads <= WANTED + SEEKS, (
        f"{statistics}: each state's read stops at its limit: {reads}"
    )
    assert sum(reads.values()) <= MOST_ROWS_READ, (
        f"{statistics}: the statement reads a few dozen rows, not the backlog: {reads}"
    )


def test_a_claim_takes_the_oldest_ready_rows_of_both_states_in_claim_order(store):
    """Reading each state on its own must not change which rows a claim takes:
    an attempt whose lease expired has waited since its own run_at, and goes
    before queued rows younger than it."""
    expired = [_running("expired-60", minutes=-60), _running("expired-35", minutes=-35)]
    queued = [queue(f"queued{n}", run_at=T0 - timedelta(minutes=n)) for n in (50, 40, 20, 10)]
    queue("not-yet-due", run_at=T0 + timedelta(minutes=1))
    _running("live-lease", minutes=-90, lease_expires_at=T0 + timedelta(minutes=1))

    claims = store.claim(Admission(T0, {KIND: LEASE}, 5))

    assert [claim.job.key for claim in claims] == [
        "expired-60",
        "queued50",
        "queued40",
        "expired-35",
        "queued20",
    ], "the five oldest ready rows, whatever their state, oldest run_at first"
    assert [claim.reclaimed for claim in claims] == [True, False, False, True, False], (
        "the rows whose leases expired are reclaimed, the queued ones claimed"
    )
    assert {job.id for job in expired} | {job.id for job in queued[:3]} == {
        claim.job.id for claim in claims
    }


@pytest.mark.django_db(transaction=True)  # TRUNCATE commits implicitly
def test_a_claim_reads_no_row_not_yet_due_and_claims_no_running_row_whose_lease_is_live(
    store, statistics_held
):
    """Scheduled rows can far outnumber ready ones; a claim must not pay for
    them, at its own priority or above. Running rows sit in the running range
    whatever their leases, so the claim reads those under a live lease (at
    most the runners' slots) and must leave them to their attempts."""
    at = store.prepare("run_at", T0)
    later = store.prepare("run_at", T0 + timedelta(minutes=1))
    with connection.cursor() as cursor:
        _rows(cursor, BACKLOG, "queued", later, "later")
        for priority in (100, 50):
            _rows(cursor, BACKLOG, "queued", later, f"later{priority}-", priority=priority)
        _rows(
            cursor,
            20,
            "running",
            store.prepare("run_at", T0 - timedelta(hours=1)),
            "busy",
            lease_expires_at=store.prepare("lease_expires_at", T0 + LEASE),
        )
        _rows(cursor, 3, "queued", at, "ready")
        reads, candidates = _counted(cursor, lambda: select_ready(cursor, at, [KIND], WANTED))

    index_reads = sum(reads[name] for name in INDEX_READS)
    assert len(candidates) == 3, "only the three due queued rows are candidates"
    # Three statements (priorities 100, 50 and 0), each at most SEEKS seeks.
    assert index_reads <= 3 + 20 + 3 * SEEKS, (
        f"the ready rows and the live leases are read, none of the rows not yet due: {reads}"
    )

    claims = store.claim(Admission(T0, {KIND: LEASE}, 8))

    assert sorted(claim.job.key for claim in claims) == ["ready0", "ready1", "ready2"]
    assert Job.objects.filter(state=State.RUNNING, attempts=1, key__startswith="busy").count() == (
        20
    ), "the attempts under a live lease keep their rows"


def _running(key: str, *, minutes: int, lease_expires_at: datetime | None = None) -> Job:
    """A row due `minutes` from T0 whose attempt is running, its lease expired
    a minute before T0 unless told otherwise."""
    job = queue(key, run_at=T0 + timedelta(minutes=minutes))
    Job.objects.filter(id=job.id).update(
        state=State.RUNNING,
        attempts=1,
        started_at=job.run_at,
        lease_expires_at=lease_expires_at or T0 - timedelta(minutes=1),
    )
    return job


def _explain(cursor: CursorWrapper, at: Any) -> list[dict[str, Any]]:
    """The lines of `jobs.store.mysql.ready.select_ready`'s plan that read jobs_job itself."""
    running = EXPIRED_SQL.format(kinds="%s", queues="")
    cursor.execute(
        "EXPLAIN " + SELECT_READY_SQL.format(kinds="%s", queues="", running=running),
        [100, at, KIND, WANTED, at, at, KIND, WANTED, 100],
    )
    columns = [column[0] for column in cursor.description]
    lines = [dict(zip(columns, line, strict=True)) for line in cursor.fetchall()]
    return [line for line in lines if line["table"] == "jobs_job"]


def _counted(cursor: CursorWrapper, read: Callable[[], Any]) -> tuple[dict[str, int], Any]:
    """`read()`'s answer, and how much each `Handler_read_%` counter of this
    session grew while it ran."""
    before = _handler_reads(cursor)
    answer = read()
    after = _handler_reads(cursor)
    return {name: after[name] - before[name] for name in after}, answer


def _handler_reads(cursor: CursorWrapper) -> dict[str, int]:
    cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
    return {name: int(value) for name, value in cursor.fetchall()}


#: 0 to 9, for counting without a recursive CTE (MySQL stops those at 1,000 rows).
_DIGITS = " UNION ALL ".join(f"SELECT {digit} AS d" for digit in range(10))


def _rows(
    cursor: CursorWrapper,
    count: int,
    state: str,
    at: Any,
    prefix: str,
    *,
    step_ms: int = 0,
    lease_expires_at: Any = None,
    priority: int = 0,
) -> None:
    """`count` rows of KIND in `state`, keyed `prefix` and a number n, due (and
    settled) at `at`, the n-th `step_ms` milliseconds earlier; one statement."""
    places = len(str(count - 1))
    numbers = " CROSS JOIN ".join(f"({_DIGITS}) AS d{place}" for place in range(places))
    number = " + ".join(f"d{place}.d * {10**place}" for place in range(places))
    cursor.execute(
        f"""
        INSERT INTO jobs_job (`id`, `kind`, `key`, `payload`, `state`, `attempts`,
                              `max_attempts`, `run_at`, `lease_expires_at`, `last_error`,
                              `created_at`, `updated_at`, `finished_at`, `priority`)
        SELECT REPLACE(UUID(), '-', ''), %s, CONCAT(%s, n), '{{}}', %s,
               CASE WHEN %s = 'queued' THEN 0 ELSE 1 END, 5,
               %s - INTERVAL n * %s MICROSECOND, %s, '', %s, %s,
               CASE WHEN %s = 'done' THEN %s END, %s
        FROM (SELECT {number} AS n FROM {numbers}) AS numbers
        WHERE n < %s
        """,
        [
            KIND,
            prefix,
            state,
            state,
            at,
            step_ms * 1000,
            lease_expires_at,
            at,
            at,
            state,
            at,
            priority,
            count,
        ],
    )
