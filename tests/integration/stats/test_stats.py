"""The queue's numbers, as the dashboard and `manage.py jobs stats` show them.

`collect` takes `now`, so each test places its rows relative to one fixed
instant; half a minute past the minute keeps every row clear of the
per-minute bucket edges.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from functools import partial

import pytest
from django.db import connection
from django.utils import timezone

import jobs.stats
from jobs.models import Job, MinuteCount, RunnerProcess, State
from jobs.stats import collect
from jobs.waiting import Holds, unserved_pairs
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def now() -> datetime:
    return timezone.now().replace(second=30, microsecond=0)


make_job = partial(factories.make_job, kind="k", finished=False, leased=False)


def settled(key: str, state: str, finished_at: datetime, kind: str = "k", took: float = 1.0) -> Job:
    return make_job(
        key,
        state=state,
        kind=kind,
        started_at=finished_at - timedelta(seconds=took),
        finished_at=finished_at,
    )


make_runner = factories.make_runner_row


def test_collect_counts_jobs_by_state(now):
    for n in range(3):
        make_job(f"q{n}")
    make_job("r", state=State.RUNNING, kind="other")
    make_job("w", state=State.WAITING, kind="other")
    for n in range(2):
        settled(f"d{n}", State.DONE, now - timedelta(days=2))
    settled("f", State.FAILED, now - timedelta(days=2))
    stats = collect(now=now)
    assert stats.by_state == {
        "queued": 3,
        "running": 1,
        "done": 2,
        "failed": 1,
        "cancelled": 0,
        "waiting": 1,
    }
    assert stats.estimated is False, "a small table is counted exactly"
    assert stats.live_by_kind == {"k": {"queued": 3}, "other": {"running": 1, "waiting": 1}}, (
        "live jobs are counted per kind and state"
    )


def test_the_lag_is_how_long_the_oldest_ready_job_has_waited(now):
    make_runner("live", ["k"], now)
    make_job("oldest", run_at=now - timedelta(seconds=90))
    make_job("newer", run_at=now - timedelta(seconds=30))
    make_job("future", run_at=now + timedelta(hours=1))
    make_job("running", state=State.RUNNING, run_at=now - timedelta(hours=3))
    assert collect(now=now).lag_seconds == 90, (
        "the lag is the oldest queued job past its run_at; a running job is not waiting"
    )


def test_the_lag_is_zero_when_no_job_is_waiting(now):
    make_job("future", run_at=now + timedelta(minutes=5))
    assert collect(now=now).lag_seconds == 0


def test_due_jobs_no_live_runner_handles_count_in_the_lag_and_apart_as_waiting_for_a_runner(now):
    make_runner("live", ["k"], now)
    make_runner("dead", ["orphan"], now - RunnerProcess.STALE_AFTER - timedelta(seconds=1))
    make_job("handled", run_at=now - timedelta(seconds=30))
    make_job("old", kind="orphan", run_at=now - timedelta(minutes=10))
    make_job("older", kind="nobody", run_at=now - timedelta(minutes=20))
    make_job("not yet", kind="nobody", run_at=now + timedelta(minutes=1))
    stats = collect(now=now)
    assert stats.lag_seconds == 20 * 60, "the lag counts every due job, whatever holds it"
    assert (stats.unhandled, stats.unhandled_wait_seconds) == (2, 20 * 60), (
        "due jobs of kinds only a gone runner (or none) handles are their own figure"
    )
    assert stats.waiting["runner"] == {"jobs": 2, "oldest_seconds": 20 * 60}
    assert stats.waiting["ready"] == {"jobs": 1, "oldest_seconds": 30}
    assert stats.waiting["run_at"]["jobs"] == 1, "the job not due yet waits for its run_at"


def test_running_jobs_whose_runner_is_gone_or_lease_expired_are_stuck(now):
    live = make_runner("live", ["k"], now)
    gone = make_runner("gone", ["k"], now - RunnerProcess.STALE_AFTER - timedelta(seconds=1))
    lease = now + timedelta(minutes=5)
    make_job("healthy", state=State.RUNNING, claimed_by=live.name, lease_expires_at=lease)
    make_job("orphaned", state=State.RUNNING, claimed_by=gone.name, lease_expires_at=lease)
    make_job("vanished", state=State.RUNNING, claimed_by="host:99", lease_expires_at=lease)
    make_job("expired", state=State.RUNNING, lease_expires_at=now - timedelta(seconds=1))
    make_job("unnamed", state=State.RUNNING, lease_expires_at=lease)
    stats = collect(now=now)
    assert stats.by_state["running"] == 5, "every running row is still a running row"
    assert stats.stuck == 3, "a gone runner's, a vanished runner's and an expired lease's"
    assert stats.healthy_running == 2, "a live runner's, and one claimed before names were kept"


def test_each_kinds_done_and_failed_of_the_last_hour_are_counted(now):
    settled("a1", State.DONE, now - timedelta(minutes=5))
    settled("a2", State.DONE, now - timedelta(minutes=50))
    settled("a3", State.FAILED, now - timedelta(minutes=1))
    settled("old", State.DONE, now - timedelta(hours=2))
    settled("b1", State.CANCELLED, now - timedelta(minutes=1), kind="b")
    settled("c1", State.FAILED, now - timedelta(minutes=1), kind="c")
    assert collect(now=now).kinds_last_hour == {
        "k": {"done": 2, "failed": 1},
        "c": {"done": 0, "failed": 1},
    }, "an hour's done and failed per kind; a cancel is not throughput"


def test_recent_settles_are_counted_for_the_last_5_minutes_and_the_last_hour(now):
    for n in range(3):
        settled(f"d{n}", State.DONE, now - timedelta(minutes=1))
    settled("f", State.FAILED, now - timedelta(minutes=3))
    settled("c", State.CANCELLED, now - timedelta(minutes=2))
    for n in range(2):
        settled(f"old{n}", State.DONE, now - timedelta(minutes=30))
    settled("older", State.FAILED, now - timedelta(minutes=50))
    settled("too-old", State.DONE, now - timedelta(hours=2))
    stats = collect(now=now)
    assert stats.last_5_minutes == {"done": 3, "failed": 1, "cancelled": 1}
    assert stats.last_hour == {"done": 5, "failed": 2, "cancelled": 1}, (
        "a job settled two hours ago is not in the last hour"
    )


def test_throughput_has_one_bucket_per_minute_of_the_last_hour_from_the_runners_counts(now):
    """Read from the runners' per-minute counts, every queue summed; the
    settled rows of the jobs table are not counted per minute."""
    minute = now.replace(second=0)
    for queue, runner, done, failed in (("a", "h:1", 2, 1), ("b", "h:2", 3, 0)):
        MinuteCount.objects.create(
            minute=minute - timedelta(minutes=3), queue=queue, runner=runner, done=done,
            failed=failed,
        )  # fmt: skip
    MinuteCount.objects.create(minute=minute - timedelta(minutes=40), queue="a", runner="h", done=1)
    settled("not counted", State.DONE, now - timedelta(minutes=3))
    throughput = collect(now=now).throughput
    minutes = [minute for minute, _, _ in throughput]
    assert minutes == sorted(minutes), "oldest first"
    assert minutes[-1] == minute, "the last bucket is the current minute"
    assert len(minutes) == 60
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(minutes)), (
        "one bucket per minute, none missing"
    )
    buckets = {minute: (done, failed) for minute, done, failed in throughput}
    assert buckets[minute - timedelta(minutes=3)] == (5, 1), "every queue summed"
    assert buckets[minute - timedelta(minutes=40)] == (1, 0)
    assert sum(done + failed for _, done, failed in throughput) == 7


def test_slowest_kinds_are_ordered_by_mean_attempt_duration(now):
    settled("a1", State.DONE, now - timedelta(minutes=5), kind="medium", took=8)
    settled("a2", State.DONE, now - timedelta(minutes=6), kind="medium", took=12)
    settled("b1", State.DONE, now - timedelta(minutes=5), kind="fast", took=0.5)
    settled("c1", State.FAILED, now - timedelta(minutes=5), kind="slow", took=30)
    settled("x", State.DONE, now - timedelta(hours=3), kind="ancient", took=999)
    slowest = collect(now=now).slowest_kinds
    assert [row["kind"] for row in slowest] == ["slow", "medium", "fast"], (
        "slowest first, and only what settled in the last hour"
    )
    assert slowest[1] == {"kind": "medium", "mean_seconds": 10.0, "count": 2}


def test_runners_are_listed_with_a_gone_flag(now):
    make_runner("alive", ["a"], now - timedelta(seconds=3))
    make_runner("dead", ["b"], now - RunnerProcess.STALE_AFTER - timedelta(seconds=1))
    runners = {runner.hostname: runner for runner in collect(now=now).runners}
    assert runners["alive"].gone is False
    assert runners["dead"].gone is True, "a runner silent past STALE_AFTER is gone"
    assert runners["alive"].kinds == ["a"]


def test_unserved_pairs_are_the_kinds_and_queues_of_live_jobs_no_live_runner_serves(now):
    make_runner("alive", ["handled"], now)
    make_runner("dead", ["dead.only"], now - timedelta(minutes=5))
    make_job("1", kind="handled")
    make_job("2", kind="dead.only")
    make_job("3", kind="nobody", state=State.RUNNING)
    make_job("4", kind="settled.only", state=State.FAILED)
    assert unserved_pairs(holds=Holds.read(now=now)) == [
        ("dead.only", "default"),
        ("nobody", "default"),
    ], "a gone runner's kinds count as unserved; kinds with no live jobs are not listed"


def test_stats_serialise_as_json(now):
    make_runner("alive", ["a"], now)
    settled("d", State.DONE, now - timedelta(minutes=1))
    data = json.loads(json.dumps(collect(now=now).as_json()))
    assert data["by_state"]["done"] == 1
    assert data["runners"][0]["hostname"] == "alive"
    assert len(data["throughput"]) == 60


@pytest.mark.postgresql
def test_settled_counts_on_a_large_postgresql_table_come_from_its_statistics(now, monkeypatch):
    monkeypatch.setattr(jobs.stats, "ESTIMATE_ABOVE", 20)
    for n in range(40):
        settled(f"d{n}", State.DONE, now - timedelta(days=3))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    for n in range(5):
        settled(f"late{n}", State.DONE, now - timedelta(days=3))  # not in the statistics yet
    make_job("q")
    stats = collect(now=now)
    assert stats.estimated is True
    assert stats.by_state["done"] == 40, "settled counts are the statistics' estimate"
    assert stats.by_state["queued"] == 1, "live counts stay exact"


@pytest.mark.postgresql
def test_a_screens_reads_run_without_jit_on_postgresql_and_leave_the_session_as_it_was():
    """Beside 10 million settled rows the planner costs the hour's range past
    `jit_above_cost`, and compiling took 70 ms of a 100 ms read."""
    from jobs.store import for_database

    def jit() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW jit")
            return str(cursor.fetchone()[0])

    before = jit()
    with for_database().screen_reads():
        during = jit()

    assert during == "off"
    assert jit() == before, "SET LOCAL: the session's own setting is back after the read"
