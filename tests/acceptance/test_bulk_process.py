"""A bulk retry of many rows on PostgreSQL beside a real runner draining other
work: no statement over a second, no transaction writing more than one batch
(the rows' `xmin`, the transaction that last wrote each, is the proof), and
the runner settles jobs between the batches all along."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import bulk
from jobs.models import Job, State
from tests.helpers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]

#: Failed rows the bulk retry walks: 20 batches, in a test well under a minute.
ROWS = 20_000
#: Jobs the runner drains meanwhile, each sleeping 20 ms: eight at a time, some
#: 400 a second, so it is still draining when the retry ends.
DRAIN = 4_000
DEAD = "bulk.dead"


class Timed:
    """The slowest statement this process sent, in seconds."""

    slowest = 0.0

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, *args)
        finally:
            self.slowest = max(self.slowest, time.perf_counter() - started)


def _stage() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                                  last_error, created_at, updated_at, finished_at, queue, priority)
            SELECT gen_random_uuid(), %s, 'f' || n, '{}', 'failed', 5, 5, now(),
                   'gave up after 5 of 5 attempts: HTTPError: 503', now() - interval '1 hour',
                   now() - interval '1 minute', now() - interval '1 minute', 'held', 0
            FROM generate_series(1, %s) AS n
            """,
            [DEAD, ROWS],
        )
        cursor.execute(
            """
            INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                                  last_error, created_at, updated_at, queue, priority)
            SELECT gen_random_uuid(), 'test.sleep', 'd' || n, '{"seconds": 0.02}', 'queued',
                   0, 5, now(), '', now(), now(), 'default', 0
            FROM generate_series(1, %s) AS n
            """,
            [DRAIN],
        )
        cursor.execute("ANALYZE jobs_job")


def drained() -> int:
    return Job.objects.filter(kind="test.sleep", state=State.DONE).count()


def test_a_bulk_retry_of_many_rows_locks_one_batch_at_a_time_while_a_runner_keeps_draining(
    runjobs,
):
    _stage()
    runner = runjobs("--queue", "default", env={"TEST_SLEEP_LEASE": "30"})
    wait_until(lambda: drained() >= 50, 60, "the runner is draining")

    samples: list[int] = []
    timed = Timed()
    chosen = bulk.Selection(
        bulk.Filter(kinds=(DEAD,), states=(State.FAILED,), error_contains="503").jobs(
            connection.alias, timezone.now()
        )
    )
    with connection.execute_wrapper(timed):
        counted = bulk.count(chosen, bulk.RETRY)
        before = drained()
        outcome = bulk.act(chosen, counted, by="test", progress=lambda _: samples.append(drained()))
    after = drained()

    assert counted.acting == ROWS
    assert outcome.touched == ROWS, str(outcome)
    assert timed.slowest < 1.0, f"the slowest statement took {timed.slowest:.2f} s"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT xmin::text, count(*) FROM jobs_job WHERE kind = %s GROUP BY 1", [DEAD]
        )
        written = dict(cursor.fetchall())
    assert max(written.values()) <= bulk.BATCH, "no transaction wrote more than one batch"
    assert len(written) >= ROWS // bulk.BATCH, "a transaction per batch"
    grew = sum(later > earlier for earlier, later in zip([before, *samples], samples, strict=False))
    assert after < DRAIN, "the runner was still draining when the retry ended"
    assert grew >= len(samples) * 3 // 4, (
        f"the runner settled jobs between most batches ({grew} of {len(samples)}): "
        "a batch's locks never held it up"
    )
    assert runner.process.poll() is None, "the runner is still running"
