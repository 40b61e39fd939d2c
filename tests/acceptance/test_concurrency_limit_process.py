"""`JobHandler.concurrency_limit` across real runner processes: several runners
claiming at once never run more attempts of the kind than its limit, and the
backlog still drains. Three processes on PostgreSQL and MariaDB, two on SQLite
(whose one writer at a time makes a third only slower)."""

from __future__ import annotations

import signal
from datetime import datetime

import pytest
from django.db import connection

from jobs import JobSpec, enqueue_many
from jobs.models import Job, LimitedAttempt
from tests.helpers import wait_until
from tests.jobapp.jobs import LimitedHandler
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = 24


def most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """The largest number of `intervals` open at one instant (an end before a
    start at the same instant)."""
    events = sorted(
        [(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
        key=lambda event: (event[0], event[1]),
    )
    open_now = peak = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    return peak


def test_runner_processes_claiming_at_once_never_run_more_than_the_kinds_limit(runjobs):
    assert LimitedHandler.concurrency_limit == 2
    assert all(
        enqueue_many(
            [
                JobSpec(kind="test.limited", key=f"limited-{n}", payload={"seconds": 0.3})
                for n in range(JOBS)
            ]
            + [JobSpec.now("test.record", f"free-{n}") for n in range(JOBS)]
        )
    )
    runners = 2 if connection.vendor == "sqlite" else 3

    processes = [runjobs() for _ in range(runners)]
    wait_until(
        lambda: Job.objects.filter(state="done").count() == 2 * JOBS,
        120,
        "every job is done",
    )
    for process in processes:
        process.process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(60) == 0, process.output()

    limited = Execution.objects.filter(key__startswith="limited-")
    assert limited.count() == JOBS, "the backlog drained, each job once"
    assert not limited.filter(finished_at=None).exists(), "every attempt finished"
    intervals = [(row.started_at, row.finished_at or row.started_at) for row in limited]
    assert most_at_once(intervals) <= 2, "never more attempts at once than the limit"
    assert most_at_once(intervals) == 2, "and the limit was used, not just respected"
    assert len({row.pid for row in limited}) > 1, "more than one process ran the kind"
    assert Execution.objects.filter(key__startswith="free-").count() == JOBS
    assert Job.objects.filter(state="done").count() == 2 * JOBS
    assert LimitedAttempt.objects.count() <= 2, "at most the last attempts' rows are left"
