"""Bulk actions by filter at size: a retry of `rows` failed jobs matched by kind,
state and error text among as many settled ones, then a redrive of the same
rows as a dead-letter group, through `jobs.bulk` in this process; the dead
letters grouped too. Issue 36's rule is read off the result: no statement over
1 s, and each transaction writing one batch at most. Then a runner's drain
alone and beside the same bulk retry (in a thread of this process): how much
a bulk action slows the work around it.

Every statement this process sends is timed (`execute_wrapper`), so the
slowest one is measured, not guessed; the rows each transaction wrote are
counted through the batch verb. Runs on request (`benchjobs --part bulk`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.utils import timezone

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.drains import into_running
from acmeproxy.benchmarks.bench.measure import SCALE, Result
from acmeproxy.benchmarks.bench.runner import Runner
from jobs import bulk, dead_letters
from jobs.models import Job, State
from jobs.store import batches

#: Not under the bench's own prefix (`bench.`): the drains beside the bulk
#: retry clear those kinds' rows as they start and end.
KIND = "bulkbench.failed"
HISTORY = "bulkbench.history"
ERROR = "gave up after 5 of 5 attempts: HTTPError: 503 Service Unavailable"


class Timed:
    """Each statement's seconds, the slowest with its text."""

    def __init__(self) -> None:
        self.count = 0
        self.slowest = 0.0
        self.slowest_sql = ""

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, *args)
        finally:
            took = time.perf_counter() - started
            self.count += 1
            if took > self.slowest:
                self.slowest, self.slowest_sql = took, " ".join(str(sql).split())[:120]


@contextmanager
def largest_batch() -> Iterator[list[int]]:
    """The most rows one call of the batch verb (one transaction) was given."""
    seen = [0]
    real = batches.requeue

    def counted(store: Any, ids: Any, now: Any, max_attempts: Any = None) -> Any:
        seen[0] = max(seen[0], len(ids))
        return real(store, ids, now, max_attempts)

    batches.requeue = counted  # restored below
    try:
        yield seen
    finally:
        batches.requeue = real


def _clean() -> None:
    Job.objects.filter(kind__in=(KIND, HISTORY)).delete()


def _stage(rows: int) -> None:
    _clean()
    stage.insert_ready(KIND, rows, prefix="f")
    stage.insert_ready(HISTORY, rows, prefix="h")
    now = timezone.now()
    Job.objects.filter(kind=KIND).update(
        state=State.FAILED, attempts=5, last_error=ERROR, finished_at=now, queue="bench.held"
    )
    Job.objects.filter(kind=HISTORY).update(state=State.DONE, attempts=1, finished_at=now)
    Job.objects.filter(kind=KIND).update(updated_at=now)
    stage.analyze()


def _retired() -> None:
    """The staged rows failed again, for the redrive to find."""
    Job.objects.filter(kind=KIND).update(
        state=State.FAILED, finished_at=timezone.now(), last_error=ERROR
    )


def _measure(key: str, label: str, selection: Callable[[], bulk.Selection], rows: int) -> Result:
    timed = Timed()
    with connection.execute_wrapper(timed), largest_batch() as most:
        started = time.perf_counter()
        chosen = selection()
        counted = bulk.count(chosen, bulk.RETRY)
        count_seconds = time.perf_counter() - started
        outcome = bulk.act(chosen, counted, by="bench", max_attempts=5)
        total = time.perf_counter() - started
    assert outcome.touched == rows, f"{key}: {outcome}"
    return Result(
        key,
        label,
        SCALE,
        {
            "jobs_per_second": round(rows / total),
            "rows": rows,
            "count_s": round(count_seconds, 2),
            "total_s": round(total, 2),
            "slowest_statement_ms": round(timed.slowest * 1000, 1),
            "statements": timed.count,
            "batches": outcome.batches,
            "largest_transaction_rows": most[0],
            "slowest_sql": timed.slowest_sql,
        },
    )


def _retry_all() -> bulk.Outcome:
    found = bulk.Filter(kinds=(KIND,), states=(State.FAILED,))
    chosen = bulk.Selection(found.jobs(connection.alias, timezone.now()))
    try:
        return bulk.act(chosen, bulk.count(chosen, bulk.RETRY), by="bench")
    finally:
        connection.close()  # this thread's own


def beside_drain(rows: int, jobs: int) -> list[Result]:
    """`jobs` no-op jobs drained by a runner already running, alone, then while
    a bulk retry of `rows` failed jobs (of a kind the runner has no handler
    for, so it claims none of them) runs in a thread of this process."""
    with stage.config(), Runner() as runner:
        alone = into_running(runner, jobs, "bulk.drain_alone", "drain alone, as met", group=SCALE)
        _stage(rows)
        outcome: list[bulk.Outcome] = []
        beside = threading.Thread(target=lambda: outcome.append(_retry_all()))
        beside.start()
        during = into_running(
            runner,
            jobs,
            "bulk.drain_beside",
            f"drain beside a bulk retry of {rows:,} rows",
            group=SCALE,
        )
        beside.join()
        during.numbers["bulk_touched"] = outcome[0].touched if outcome else None
        _clean()
    ratio = (during.rate or 0) / (alone.rate or 1)
    during.numbers["vs_alone"] = f"{ratio:.0%}"
    return [alone, during]


def measured(rows: int, jobs: int) -> list[Result]:
    """The bulk retry, the dead letters and the redrive over `rows` failed jobs;
    a drain of `jobs` alone and beside a bulk retry."""
    return [*_bulk(rows), *beside_drain(rows, jobs)]


def _bulk(rows: int) -> list[Result]:
    _stage(rows)
    try:
        retry = _measure(
            "bulk_retry",
            f"bulk retry by filter, {rows:,} failed among {2 * rows:,}",
            lambda: bulk.Selection(
                bulk.Filter(kinds=(KIND,), states=(State.FAILED,), error_contains="503").jobs(
                    connection.alias, timezone.now()
                )
            ),
            rows,
        )
        _retired()
        timed = Timed()
        with connection.execute_wrapper(timed):
            started = time.perf_counter()
            found = dead_letters.groups()
            grouped = time.perf_counter() - started
        groups = Result(
            "dead_letters",
            f"dead letters grouped, {rows:,} failed",
            SCALE,
            {
                "groups": len(found),
                "seconds": round(grouped, 2),
                "slowest_statement_ms": round(timed.slowest * 1000, 1),
            },
        )
        line = dead_letters.error_line(ERROR)
        redrive = _measure(
            "redrive",
            f"redrive of one dead-letter group, {rows:,} jobs",
            lambda: dead_letters.selection(KIND, line, connection.alias),
            rows,
        )
        return [retry, groups, redrive]
    finally:
        _clean()
