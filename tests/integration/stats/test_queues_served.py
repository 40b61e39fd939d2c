"""A ready job counts as served only when a live runner would claim it: a handler
for its kind and, for a runner started with `--queue`, its queue among those it
serves. The dashboard's waiting-for-a-runner figure, `unserved_pairs` and the
job list's waiting-for-a-handler filter all read it so; the lag counts every
due job, whatever holds it."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial

import pytest
from django.contrib import admin
from django.utils import timezone

from jobs import controls
from jobs.admin.filters import WaitingForHandlerFilter
from jobs.models import Job, RunnerProcess
from jobs.stats import collect
from tests import factories

pytestmark = pytest.mark.django_db

make_job = partial(factories.make_job, kind="k", finished=False, leased=False)


@pytest.fixture
def now() -> datetime:
    return timezone.now().replace(second=30, microsecond=0)


def make_runner(hostname: str, now: datetime, queues: list[str] | None) -> RunnerProcess:
    return factories.make_runner_row(hostname, ["k"], now, queues)


def test_a_due_job_in_a_queue_no_live_runner_serves_waits_for_a_runner_and_counts_in_the_lag(now):
    make_runner("mail-only", now, ["emails"])
    make_job("mail", queue="emails", run_at=now - timedelta(seconds=30))
    make_job("report", queue="reports", run_at=now - timedelta(minutes=10))

    stats = collect(now=now)

    assert stats.lag_seconds == 10 * 60, "the lag counts every due job, served or not"
    assert (stats.unhandled, stats.unhandled_wait_seconds) == (1, 10 * 60)
    assert stats.waiting_by_queue["reports"]["runner"]["jobs"] == 1
    assert stats.waiting_by_queue["emails"]["ready"]["jobs"] == 1


def test_a_runner_serving_one_queue_leaves_its_kind_unserved_in_other_queues_only(now):
    """Runners serve (kind, queue) pairs: the runner has kind k, so k is not
    "a kind no live runner handles"; its jobs in queue reports are unserved."""
    make_runner("mail-only", now, ["emails"])
    make_job("mail", queue="emails")
    make_job("report", queue="reports")

    assert collect(now=now).unserved == [("k", "reports")]


def test_a_runner_serving_every_queue_serves_a_job_in_any_queue(now):
    make_runner("everything", now, None)
    make_job("report", queue="reports", run_at=now - timedelta(minutes=10))

    stats = collect(now=now)

    assert (stats.lag_seconds, stats.unhandled) == (10 * 60, 0)
    assert stats.unserved == []


def test_the_waiting_for_a_handler_filter_lists_jobs_in_a_queue_nobody_serves(rf):
    # The filter reads the real clock: the runner reports in now.
    make_runner("mail-only", timezone.now(), ["emails"])
    make_job("mail", queue="emails")
    make_job("report", queue="reports")
    request = rf.get("/", {"handler": "missing"})
    waiting = WaitingForHandlerFilter(
        request, {"handler": ["missing"]}, Job, admin.site._registry[Job]
    )

    listed = waiting.queryset(request, Job.objects.all())

    assert list(listed.values_list("key", flat=True)) == ["report"]


def test_the_stats_name_the_queues_each_runner_serves(now):
    make_runner("mail-only", now, ["emails"])
    make_runner("everything", now, None)

    runners = {runner.hostname: runner for runner in collect(now=now).runners}

    assert runners["mail-only"].queues == ["emails"]
    assert runners["everything"].queues is None


@pytest.mark.parametrize(("scope", "name"), [("queue", "reports"), ("kind", "k")])
def test_jobs_held_by_a_pause_count_in_the_lag_and_are_said_to_wait_for_the_pause(now, scope, name):
    """They wait by an operator's choice: the lag still shows them (a pause
    left on by mistake must not read as an empty queue), broken out as "pause"."""
    make_runner("everything", now, None)
    make_job("report", queue="reports", run_at=now - timedelta(minutes=10))
    assert collect(now=now).lag_seconds == 10 * 60

    controls.pause(scope, name, "test:operator")

    stats = collect(now=now)
    assert stats.lag_seconds == 10 * 60
    assert stats.waiting["pause"] == {"jobs": 1, "oldest_seconds": 10 * 60}
    assert stats.waiting["ready"]["jobs"] == 0
    assert [(c["scope"], c["name"], c["paused"]) for c in stats.controls] == [(scope, name, True)]
