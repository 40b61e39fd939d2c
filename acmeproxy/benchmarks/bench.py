"""What a queue's users feel, measured: drain rate, enqueue rate, wake-up latency,
the raw-SQL ceiling, and whether a claim stays cheap as history grows.

Every part runs against the database `DATABASE_URL` names, queues only jobs of
kind `bench.*`, and deletes them afterwards; run it on a scratch database all
the same, since a runner it starts also takes any other ready work there.
The generators below write rows directly with vendor SQL: they set the stage
quickly and are not part of what is measured.
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from acmeproxy.benchmarks.jobs import NOOP
from jobs import JobSpec, enqueue, enqueue_many
from jobs.config import DEFAULTS, KEYS
from jobs.models import Job, JobsConfig
from jobs.store import for_database

ROOT = Path(__file__).resolve().parent.parent.parent

#: The tuned config the drain is run with a second time, and a third time
#: with `TUNED_LANES` claiming loops (`runjobs --lanes`).
TUNED = {"max_concurrent": 64, "poll_interval_ms": 50}
TUNED_LANES = 2


@dataclass
class Result:
    part: str
    numbers: dict[str, Any] = field(default_factory=dict)


def median_of(repeat: int, run: Callable[[], list[Result]]) -> list[Result]:
    """`run` `repeat` times; for each part it measures, the run with the median
    rate, with every run's rate beside it (one run on this 2-core machine can
    differ from the next by a third)."""
    runs = [run() for _ in range(max(1, repeat))]
    chosen = []
    for results in zip(*runs, strict=True):
        ordered = sorted(results, key=lambda result: result.numbers.get("jobs_per_second") or 0)
        median = ordered[len(ordered) // 2]
        if len(ordered) > 1:
            median.numbers["runs_jobs_per_second"] = [
                result.numbers.get("jobs_per_second") for result in results
            ]
        chosen.append(median)
    return chosen


def describe_database() -> str:
    if connection.vendor == "sqlite":
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        row = cursor.fetchone()
    return f"{connection.vendor} {row[0] if row else '?'}"


def _clean(*, compact: bool = False) -> None:
    """Delete the benchmark's rows; on PostgreSQL also VACUUM, so the next part
    starts from a table in its steady state rather than behind thousands of
    just-deleted index entries (setup, not measured). `compact` rewrites the
    table and its indexes instead (VACUUM FULL): after the scale part's
    1,100,000 rows, a plain VACUUM left the identity index at 90 MB and the
    primary key at 42 MB for a table of one row, for the next run to insert
    into. Not after every part: a rewritten table has no free pages, and
    inserting into it (extending the file) is not a working queue's steady
    state: `enqueue_many` measured ~20,000 jobs/s there against ~25,000."""
    Job.objects.filter(kind__startswith="bench.").delete()
    if connection.vendor == "postgresql" and connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute("VACUUM FULL ANALYZE jobs_job" if compact else "VACUUM ANALYZE jobs_job")


@contextmanager
def _config(**values: int) -> Iterator[None]:
    """Run with the config row set to the defaults overridden by `values`, then restore it."""
    row = JobsConfig.load()
    saved = {name: getattr(row, name) for name in KEYS}
    for name in KEYS:
        setattr(row, name, values.get(name, getattr(DEFAULTS, name)))
    row.save()
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(row, name, value)
        row.save()


def _queue_ready(count: int, kind: str = NOOP) -> None:
    """`count` ready rows, inserted in bulk, then ANALYZEd (setup, not measured).

    Autovacuum would analyze the table within its naptime (a minute); the
    drain is over sooner, and until then PostgreSQL plans from the statistics
    of the empty table `_clean` left, which make a sort of every ready row
    look free next to the ordered index scan: measured, ~800 jobs/s instead of
    ~4,000.
    """
    now = timezone.now() - timedelta(seconds=1)
    batch = []
    for n in range(count):
        batch.append(Job(kind=kind, key=f"{n}", max_attempts=5, run_at=now))
        if len(batch) == 5_000:
            Job.objects.bulk_create(batch)
            batch = []
    Job.objects.bulk_create(batch)
    if connection.vendor == "postgresql" and connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE jobs_job")


class DatabaseCPU:
    """CPU seconds spent by local PostgreSQL processes while the block runs.

    Sampled from /proc on a thread, since a runner's backends exit with it and
    take their counters along; a backend first seen mid-run counts from zero.
    """

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def __enter__(self) -> DatabaseCPU:
        self.first = _postgres_processes()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample_until_stopped(self) -> None:
        while True:
            self.last.update(_postgres_processes())
            if self._stop.wait(0.1):
                return

    @property
    def seconds(self) -> float:
        return sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())


class ResidentMemory:
    """A process's resident set size, sampled from /proc on a thread until it exits.

    Peak RSS alone cannot tell a runner that grows with every job from one
    that reached its size early: the peak over the first quarter of the run
    against the peak over all of it can. Empty where /proc is not there.
    """

    def __init__(self, pid: int) -> None:
        self.samples: list[float] = []
        self._status = Path(f"/proc/{pid}/status")
        self._thread = threading.Thread(target=self._sample_until_gone, daemon=True)
        self._thread.start()

    def _sample_until_gone(self) -> None:
        while True:
            try:
                status = self._status.read_text()
            except OSError:
                return  # exited (or no /proc)
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    self.samples.append(int(line.split()[1]) / 1024)
            time.sleep(0.1)

    def peak(self, until: float = 1.0) -> float | None:
        """The largest sample in the first `until` of the run (1.0: all of it), in MB."""
        self._thread.join()
        if not self.samples:
            return None
        return round(max(self.samples[: max(1, int(len(self.samples) * until))]), 1)


def _postgres_processes() -> dict[int, float]:
    """CPU seconds so far of every process named postgres, by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")].startswith("postgres"):
            fields = stat[stat.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _runjobs(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A `runjobs` process as production runs one: DEBUG off (Django's debug
    cursor formats every query for its log, which a deployed runner never
    pays), and INFO-level lines only for what is not routine."""
    full_env = {
        **os.environ,
        "JOBS_LOG_LEVEL": "WARNING",
        "DEBUG": "False",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runjobs", *args],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.DEVNULL,
    )


def drain(count: int, label: str, *, lanes: int = 1, **config: int) -> Result:
    """`count` ready no-op jobs, then one `runjobs --burst --lanes LANES` process
    until all are done."""
    _clean()
    _queue_ready(count)
    with _config(**config), DatabaseCPU() as database:
        started = time.monotonic()
        process = _runjobs("--burst", f"--lanes={lanes}")
        memory = ResidentMemory(process.pid)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
    jobs = Job.objects.filter(kind=NOOP)
    done = jobs.filter(state="done").count()
    first = jobs.order_by("started_at").values_list("started_at", flat=True).first()
    last = jobs.order_by("-finished_at").values_list("finished_at", flat=True).first()
    busy = (last - first).total_seconds() if first and last else wall
    numbers: dict[str, Any] = {
        "jobs": count,
        "done": done,
        "exit_status": process.returncode,
        "jobs_per_second": round(done / busy) if busy else None,
        "wall_seconds": round(wall, 2),
        "runner_cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        # Sampled, not `ru_maxrss`: Linux carries the high-water mark of the
        # forked copy of this process (large after queueing the jobs) across
        # the child's exec, so that read 86 MB for a runner that sampled 55.
        "runner_peak_rss_mb": memory.peak() or round(usage.ru_maxrss / 1024, 1),
        "runner_peak_rss_mb_first_quarter": memory.peak(0.25),
        "config": config or "default",
        "lanes": lanes,
    }
    if connection.vendor == "postgresql":
        numbers["database_cpu_seconds"] = round(database.seconds, 2)
        numbers["database_cpu_cores"] = round(database.seconds / wall, 2)
    _clean()
    return Result(f"drain ({label})", numbers)


def _rate(part: str, count: int, seconds: float, *, jobs: int | None = None) -> Result:
    """`count` jobs handled in `seconds`, as a part's result; `jobs` when fewer
    than `count` were written (refused duplicates)."""
    return Result(
        part, {"jobs": count if jobs is None else jobs, "jobs_per_second": round(count / seconds)}
    )


def enqueue_rates(count: int) -> list[Result]:
    """`count` enqueue calls, each its own transaction."""
    _clean()
    started = time.perf_counter()
    for n in range(count):
        enqueue(JobSpec.now(NOOP, f"e{n}"))
    one_by_one = time.perf_counter() - started
    _clean()
    specs = [JobSpec.now(NOOP, f"m{n}") for n in range(count)]
    started = time.perf_counter()
    queued = enqueue_many(specs)
    bulk = time.perf_counter() - started
    _clean()
    return [
        _rate("enqueue (one per transaction)", count, one_by_one),
        _rate("enqueue_many (one call)", count, bulk, jobs=sum(queued)),
    ]


def raw_enqueue_rates(count: int) -> list[Result]:
    """The same inserts from a bare psycopg connection, PostgreSQL only: what the
    database, the driver and this machine allow without the queue's own Python
    (checking each spec, Django's cursor), to read `enqueue_rates` against."""
    if connection.vendor != "postgresql":
        return []
    import psycopg
    from psycopg.types.json import Jsonb

    from jobs.store.postgresql import driver, sql

    _clean()
    now = timezone.now()
    with psycopg.connect(**driver.plain_connection_params(connection), autocommit=True) as raw:
        started = time.perf_counter()
        for n in range(count):
            row = [uuid.uuid4(), NOOP, f"r{n}", Jsonb({}), None, 5, now, None, now, now]
            raw.execute(sql.INSERT_SQL, row, prepare=True).fetchall()
        one_by_one = time.perf_counter() - started
        _clean()
        arrays = [
            "{" + ",".join([NOOP] * count) + "}",
            "{" + ",".join(f"b{n}" for n in range(count)) + "}",
            "{" + ",".join(['"{}"'] * count) + "}",
            "{" + ",".join(["NULL"] * count) + "}",
            "{" + ",".join([now.isoformat()] * count) + "}",
            "{" + ",".join(["NULL"] * count) + "}",
        ]
        started = time.perf_counter()
        raw.execute(sql.INSERT_MANY_SQL, [5, now, now, *arrays]).fetchall()
        bulk = time.perf_counter() - started
    _clean()
    return [
        _rate("enqueue, raw psycopg (the same INSERT)", count, one_by_one),
        _rate("enqueue_many, raw (the statement alone)", count, bulk),
    ]


def latency(count: int, gap: float) -> Result:
    """A separate `runjobs` process, idle; this one enqueues `count` jobs `gap` s apart."""
    _clean()
    with _config():
        process = _runjobs()
        time.sleep(3)  # start-up and the first, empty pass
        committed: dict[str, float] = {}
        for n in range(count):
            with transaction.atomic():
                enqueue(JobSpec.now(NOOP, f"l{n}"))
                # Read just before COMMIT: a runner can claim the job before
                # this process returns from the commit, so this is the
                # conservative end (the wait includes the commit itself).
                committed[f"l{n}"] = time.time()
            time.sleep(gap)
        give_up = time.monotonic() + 30
        while Job.objects.filter(kind=NOOP, started_at__isnull=True).exists():
            if time.monotonic() > give_up:
                break
            time.sleep(0.05)
        process.terminate()
        process.wait(30)
    waits = sorted(
        (started.timestamp() - committed[key]) * 1000
        for key, started in Job.objects.filter(kind=NOOP).values_list("key", "started_at")
        if started is not None
    )
    _clean()
    if not waits:
        return Result("latency", {"error": "no job started"})

    def pct(p: float) -> float:
        return round(waits[min(len(waits) - 1, int(p * len(waits)))], 2)

    return Result(
        "latency (enqueue commit to start, ms)",
        {
            "jobs": count,
            "started": len(waits),
            "p50": pct(0.50),
            "p95": pct(0.95),
            "p99": pct(0.99),
        },
    )


def ceiling(count: int) -> Result:
    """The raw psycopg loop: claim 100 with SKIP LOCKED, settle them in one statement."""
    if connection.vendor != "postgresql":
        return Result("ceiling", {"skipped": "PostgreSQL only"})
    with connection.cursor() as cursor:
        cursor.execute(CEILING_SETUP_SQL, [count])
    claimed_total = 0
    started = time.perf_counter()
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(CEILING_CLAIM_SQL)
            ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            break
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(CEILING_SETTLE_SQL, [ids])
        claimed_total += len(ids)
    elapsed = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_ceiling")
    return _rate("ceiling (raw SKIP LOCKED batch loop)", claimed_total, elapsed)


def ceiling_per_pass(count: int, batch: int = 8) -> Result:
    """The raw loop at the default config's grain: each transaction settles the
    previous `batch` and claims the next, one statement, as a runner's pass does
    with 8 slots. What a drain at the default config could reach with no Python
    around the statement; PostgreSQL only."""
    if connection.vendor != "postgresql":
        return Result("ceiling per pass", {"skipped": "PostgreSQL only"})
    with connection.cursor() as cursor:
        cursor.execute(CEILING_SETUP_SQL, [count])
    settled_total = 0
    ids: list[int] = []
    started = time.perf_counter()
    while True:
        with connection.cursor() as cursor:
            cursor.execute(CEILING_PASS_SQL, [ids, batch])
            ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            break
        settled_total += len(ids)
    elapsed = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_ceiling")
    return _rate(f"ceiling, {batch} per pass (raw settle-and-claim loop)", settled_total, elapsed)


def drains_against_ceilings(results: list[Result]) -> None:
    """Beside each ceiling, each drain's rate as a fraction of it: the figure to
    compare across hours and days, since the drains and the raw loops move
    with the machine together."""
    drains = {
        result.part.removeprefix("drain (").removesuffix(")"): result.numbers["jobs_per_second"]
        for result in results
        if result.part.startswith("drain (") and result.numbers.get("jobs_per_second")
    }
    for result in results:
        ceiling = result.numbers.get("jobs_per_second")
        if result.part.startswith("ceiling") and ceiling and drains:
            result.numbers["drains_as_fraction"] = {
                label: round(rate / ceiling, 2) for label, rate in drains.items()
            }


#: A scratch table shaped like the ready part of jobs_job.
CEILING_SETUP_SQL = """
    DROP TABLE IF EXISTS bench_ceiling;
    CREATE TABLE bench_ceiling (
        id bigserial PRIMARY KEY, state text NOT NULL, run_at timestamptz NOT NULL
    );
    CREATE INDEX bench_ceiling_ready ON bench_ceiling (run_at) WHERE state = 'queued';
    INSERT INTO bench_ceiling (state, run_at) SELECT 'queued', now() FROM generate_series(1, %s);
    ANALYZE bench_ceiling;
"""
CEILING_CLAIM_SQL = """
    UPDATE bench_ceiling SET state = 'running'
    WHERE id IN (SELECT id FROM bench_ceiling WHERE state = 'queued' AND run_at <= now()
                 ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED)
    RETURNING id
"""
CEILING_SETTLE_SQL = "UPDATE bench_ceiling SET state = 'done' WHERE id = ANY(%s)"
CEILING_PASS_SQL = """
    WITH settled AS (
        UPDATE bench_ceiling SET state = 'done' WHERE id = ANY(%s::bigint[]) RETURNING id
    )
    UPDATE bench_ceiling SET state = 'running'
    WHERE id IN (SELECT id FROM bench_ceiling WHERE state = 'queued' AND run_at <= now()
                 ORDER BY run_at LIMIT %s FOR UPDATE SKIP LOCKED)
    RETURNING id
"""


def _claim_cost(samples: int) -> float:
    """Median seconds of one claim of 8 rows, over `samples` claims."""
    store = for_database()
    lease = {"bench.scale": timedelta(minutes=5)}
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        claims = store.claim(timezone.now(), lease, 8)
        times.append(time.perf_counter() - started)
        assert len(claims) == 8, "enough ready rows for every sample"
    return statistics.median(times)


def scale(samples: int, settled: int, future: int) -> Result:
    """Claim cost with an empty table, then beside `settled` settled and `future`
    future-scheduled rows: a claim must not grow with history."""
    _clean()
    _queue_ready(samples * 8, kind="bench.scale")
    empty = _claim_cost(samples)
    _clean()
    _bulk_history(settled, future)
    _queue_ready(samples * 8, kind="bench.scale")
    full = _claim_cost(samples)
    _clean(compact=True)
    return Result(
        "scale (claim of 8, median)",
        {
            "empty_ms": round(empty * 1000, 3),
            "with_history_ms": round(full * 1000, 3),
            "settled_rows": settled,
            "future_rows": future,
            "ratio": round(full / empty, 2),
        },
    )


def _bulk_history(settled: int, future: int) -> None:
    """Settled and far-future rows, generated inside the database."""
    settled_sql, future_sql = HISTORY_SQL[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(settled_sql, [settled])
        cursor.execute(future_sql, [future])


#: Per vendor: `n` rows settled `done` a day ago; `n` rows queued a month out.
HISTORY_SQL = {
    "postgresql": (
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, finished_at)
        SELECT gen_random_uuid(), 'bench.history', 's' || n, '{}', 'done', 1, 5,
               now() - interval '1 day', '', now(), now(), now() - interval '1 day'
        FROM generate_series(1, %s) AS n
        """,
        """
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at)
        SELECT gen_random_uuid(), 'bench.history', 'f' || n, '{}', 'queued', 0, 5,
               now() + interval '30 days', '', now(), now()
        FROM generate_series(1, %s) AS n
        """,
    ),
    "sqlite": (
        """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at, finished_at)
        SELECT lower(hex(randomblob(16))), 'bench.history', 's' || i, '{}', 'done', 1, 5,
               datetime('now', '-1 day'), '', datetime('now'), datetime('now'),
               datetime('now', '-1 day')
        FROM n
        """,
        """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
        INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                              last_error, created_at, updated_at)
        SELECT lower(hex(randomblob(16))), 'bench.history', 'f' || i, '{}', 'queued', 0, 5,
               datetime('now', '+30 days'), '', datetime('now'), datetime('now')
        FROM n
        """,
    ),
}
