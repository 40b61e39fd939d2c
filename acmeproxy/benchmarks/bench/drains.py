"""Drains: how fast a backlog of no-op jobs is worked off.

As met: a runner already running and idle, a backlog of payload jobs
committed at once and announced as `enqueue_many` announces it, completion
counted from this process, and no VACUUM or ANALYZE before it (the table's
statistics are whatever the last ANALYZE left; autovacuum may be off).
Favourable (the old benchmark's): empty payloads, the table vacuumed and
analyzed with the backlog in it, and a `runjobs --burst` started after the
backlog is queued, its rate taken from the rows' own timestamps.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.db import connection
from django.db.models import Max, Min

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.measure import AS_MET, FAVOURABLE, Result, per_second
from acmeproxy.benchmarks.bench.procfs import DatabaseCPU, ResidentMemory
from acmeproxy.benchmarks.bench.runner import Runner, manage
from acmeproxy.benchmarks.jobs import NOOP, RETRY_ONCE
from jobs.models import Job

#: The tuned config of the favourable drains, the second with `TUNED_LANES`
#: claiming loops (`runjobs --lanes`).
TUNED = {"max_concurrent": 64, "poll_interval_ms": 50}
TUNED_LANES = 2


def _busy_span(count: int, kind: str = NOOP) -> float | None:
    """Seconds from the first job's start to the last one's finish, as the rows say."""
    span = Job.objects.filter(kind=kind).aggregate(first=Min("started_at"), last=Max("finished_at"))
    if span["first"] is None or span["last"] is None:
        return None
    return float((span["last"] - span["first"]).total_seconds())


def into_running(
    runner: Runner,
    count: int,
    key: str,
    label: str,
    *,
    group: str = AS_MET,
    analyzed: bool = False,
    keep: bool = False,
    kind: str = NOOP,
) -> Result:
    """`count` payload jobs arrive at `runner`, idle; the rate from their commit
    until this process counts them all done. `analyzed`: ANALYZE inside the
    backlog's transaction (favourable). `keep` leaves the settled rows for
    the sweep to find."""
    stage.clean()
    cpu_before = runner.cpu_seconds()
    with DatabaseCPU() as database:
        started = time.monotonic()
        stage.backlog(kind, count, analyzed=analyzed)
        committed = time.monotonic()
        finished = runner.wait_until_done(kind, count)
    cpu_after = runner.cpu_seconds()
    seconds = finished - committed
    busy = _busy_span(count, kind)
    numbers: dict[str, Any] = {
        "jobs": count,
        "jobs_per_second": per_second(count, seconds),
        "runner_side_jobs_per_second": per_second(count, busy) if busy else None,
        "backlog_insert_seconds": round(committed - started, 2),
    }
    if cpu_before is not None and cpu_after is not None:
        numbers["runner_cpu_seconds"] = round(cpu_after - cpu_before, 2)
    if connection.vendor == "postgresql":
        numbers["database_cpu_cores"] = round(database.seconds / (finished - started), 2)
        # What the planner believed during the drain (autovacuum off: no
        # ANALYZE can have run since the backlog's commit unless it ran one).
        planned = stage.planned_rows()
        numbers["planned_rows"] = "never analyzed" if planned is None else planned
    if not keep:
        stage.clean()
    return Result(key, label, group, numbers)


def as_met(count: int) -> list[Result]:
    with stage.config(), Runner() as runner:
        return [
            into_running(
                runner, count, "drain.as_met", "drain, default config, runner already running"
            )
        ]


def retrying(count: int) -> list[Result]:
    """The as-met drain of jobs that each fail once and then succeed, retried
    at once (`retry_base_seconds=0`): twice the attempts, and every first one
    settled by a single-row retry that writes its attempt record's entry."""
    with stage.config(retry_base_seconds=0, retry_max_seconds=0), Runner() as runner:
        return [
            into_running(
                runner,
                count,
                "drain.retry_once",
                "drain, every job retried once at once, runner already running",
                kind=RETRY_ONCE,
            )
        ]


def debug_pair(count: int) -> list[Result]:
    """The same drain into a runner with DEBUG off, then into one with Django's
    default DEBUG=True (settings.py reads DEBUG from the environment)."""
    results = []
    with stage.config():
        for debug in (False, True):
            with Runner(debug=debug) as runner:
                results.append(
                    into_running(
                        runner,
                        count,
                        f"debug.{'on' if debug else 'off'}",
                        f"drain, runner with DEBUG={debug}",
                    )
                )
    return results


def burst(count: int, key: str, label: str, *, lanes: int = 1, **config: int) -> Result:
    """The old drain: `count` empty-payload jobs queued and analyzed, then one
    `runjobs --burst --lanes LANES` until it exits; the rate from the rows'
    first start to their last finish."""
    stage.clean_and_vacuum()
    stage.insert_ready(NOOP, count, with_payload=False)
    stage.analyze()
    with stage.config(**config), DatabaseCPU() as database:
        started = time.monotonic()
        process = manage("runjobs", "--burst", f"--lanes={lanes}")
        memory = ResidentMemory(process.pid)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
    done = Job.objects.filter(kind=NOOP, state="done").count()
    busy = _busy_span(count) or wall
    numbers: dict[str, Any] = {
        "jobs": count,
        "done": done,
        "exit_status": process.returncode,
        "jobs_per_second": per_second(done, busy),
        "wall_seconds": round(wall, 2),
        "runner_cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        # Sampled, not `ru_maxrss`: Linux carries the high-water mark of the
        # forked copy of this process across the child's exec.
        "runner_peak_rss_mb": memory.peak() or round(usage.ru_maxrss / 1024, 1),
        "runner_peak_rss_mb_first_quarter": memory.peak(0.25),
    }
    if connection.vendor == "postgresql":
        numbers["database_cpu_cores"] = round(database.seconds / wall, 2)
    stage.clean_and_vacuum()
    return Result(key, label, FAVOURABLE, numbers)


def favourable(count: int) -> list[Result]:
    setup = "runjobs --burst started after queueing, empty payloads, analyzed"
    return [
        burst(count, "drain.burst", f"drain, default config ({setup})"),
        burst(
            count,
            "drain.burst_tuned",
            "drain, tuned (max_concurrent=64, poll 50 ms; same)",
            **TUNED,
        ),
        burst(
            count,
            "drain.burst_lanes",
            f"drain, tuned, {TUNED_LANES} lanes (same)",
            lanes=TUNED_LANES,
            **TUNED,
        ),
    ]


def cold(count: int) -> list[Result]:
    """A burst into a table whose statistics say it is empty (ANALYZE while
    empty, then the backlog), beside the same burst with the backlog counted
    by an ANALYZE in its own transaction (favourable). PostgreSQL only: its
    planner is the one whose plan the statistics could change."""
    if connection.vendor != "postgresql":
        reason = (
            "PostgreSQL only: planner statistics; the MySQL/MariaDB and SQLite claims "
            "are pinned to their index (see the store's EXPLAIN tests)"
        )
        return [
            Result(
                "cold.empty_stats",
                "drain, burst into a table planned as empty",
                AS_MET,
                skipped=reason,
            ),
        ]
    with stage.config(), Runner() as runner:
        stage.clean()
        stage.analyze()
        empty = into_running(
            runner, count, "cold.empty_stats", "drain, burst into a table planned as empty"
        )
        analyzed = into_running(
            runner,
            count,
            "cold.analyzed",
            "drain, the same burst analyzed with its rows present",
            group=FAVOURABLE,
            analyzed=True,
        )
    return [empty, analyzed]
