"""The routing drain: a backlog spread over 4 queues and priorities from -100
to 100, a quarter of it of a kind limited to 4 attempts at once, worked off
by one runner already running, as the as-met drain is. Beside the plain
drain (one queue, priority 0, no limit) it shows what claim order by
priority and a concurrency limit cost.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.measure import AS_MET, Result, per_second
from acmeproxy.benchmarks.bench.runner import Runner
from acmeproxy.benchmarks.jobs import LIMITED, NOOP
from jobs import controls
from jobs.models import Control, Job
from jobs.wakeup import wake_runners

QUEUES = 4

#: Per vendor: `count` rows, keys `route` n, in queue `q` n % 4, at a priority
#: spread over -100..100, every fourth of kind LIMITED and the rest NOOP.
ROUTED_SQL = {
    "postgresql": """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, queue, priority)
        SELECT gen_random_uuid(), CASE WHEN n %% 4 = 0 THEN %s ELSE %s END, 'route' || n,
               jsonb_build_object('subject', 4242, 'i', n, 'tenant', 'acme'), 'queued', 0, 5,
               now() - interval '1 second', '', now(), now(),
               'q' || (n %% 4), (n * 37) %% 201 - 100
        FROM generate_series(1, %s) AS n
    """,
}


def _insert_routed(count: int) -> None:
    statement = ROUTED_SQL.get(connection.vendor)
    if statement is not None:
        with connection.cursor() as cursor:
            cursor.execute(statement, [LIMITED, NOOP, count])
        return
    ready = timezone.now() - timedelta(seconds=1)
    Job.objects.bulk_create(
        Job(
            kind=LIMITED if n % 4 == 0 else NOOP,
            key=f"route{n}",
            payload={"subject": 4242, "i": n, "tenant": "acme"},
            max_attempts=5,
            run_at=ready,
            queue=f"q{n % QUEUES}",
            priority=(n * 37) % 201 - 100,
        )
        for n in range(1, count + 1)
    )


#: The limit the routing drain sets on LIMITED, as an operator would.
LIMIT = 4


def routed(count: int) -> list[Result]:
    controls.set_limit(LIMITED, "benchjobs", LIMIT)
    try:
        return _routed(count)
    finally:
        Control.objects.filter(name=LIMITED).delete()


def _routed(count: int) -> list[Result]:
    with stage.config(), Runner() as runner:
        stage.clean()
        started = time.monotonic()
        with transaction.atomic():
            _insert_routed(count)
            wake_runners()
        committed = time.monotonic()
        runner.wait_until_done(NOOP, count - count // 4)
        finished = runner.wait_until_done(LIMITED, count // 4)
        stage.clean()
    numbers: dict[str, Any] = {
        "jobs": count,
        "jobs_per_second": per_second(count, finished - committed),
        "limited_jobs": count // 4,
        "queues": QUEUES,
        "backlog_insert_seconds": round(committed - started, 2),
    }
    label = "drain, 4 queues, priorities -100..100, a quarter limited to 4, runner already running"
    return [Result("drain.routed", label, AS_MET, numbers)]
