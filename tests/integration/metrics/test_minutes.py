"""The per-minute counts behind the dashboard's live charts: added by the
tally's flush (never per job), written by the heartbeat's save, pruned after
`KEEP`, summed per minute and queue for the charts.

The tally and the accumulator here are fresh instances, so a test reads only
what it noted; `save` writes as the heartbeat does.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from freezegun import freeze_time

from jobs.metrics import minutes as minutes_module
from jobs.metrics import tally as tally_module
from jobs.metrics.minutes import KEEP, Minutes, quantile, read
from jobs.models import MinuteCount

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 7, 12, 30, 30, tzinfo=UTC)


def job(queue: str, due: datetime, started: datetime | None = None) -> SimpleNamespace:
    return SimpleNamespace(kind="k", queue=queue, run_at=due, created_at=due, started_at=started)


@pytest.fixture
def counts(monkeypatch) -> Minutes:
    """A fresh accumulator in the tally's place, and a tally that applies each note."""
    fresh = Minutes()
    monkeypatch.setattr(minutes_module, "minutes", fresh)
    return fresh


def test_the_tally_adds_starts_ends_and_waits_per_queue_and_a_save_writes_them(counts):
    tally = tally_module.Tally()
    started = [job("mail", NOW - timedelta(seconds=s)) for s in (0.002, 0.002, 3)]
    tally.started(started, NOW)
    tally.started([job("reports", NOW)], NOW)
    tally.finished([job("mail", NOW, NOW)] * 2, "done", NOW)
    tally.finished([job("mail", NOW, NOW)], "retry", NOW)
    tally.finished([job("mail", NOW, NOW)], "cancelled", NOW)
    tally.finished([job("mail", NOW, NOW)], "released", NOW)

    assert counts.save("default", NOW) == 2, "one row per queue and minute"

    mail = MinuteCount.objects.get(queue="mail")
    assert (mail.minute, mail.started, mail.done, mail.failed) == (
        NOW.replace(second=0),
        3,
        2,
        1,
    ), "a cancel or a release is no failure; a retried attempt is"
    waits = MinuteCount.objects.filter(queue="mail").values("wait_1", "wait_10").get()
    assert waits == {"wait_1": 2, "wait_10": 1}, (
        "two waits of 2 ms in the bucket up to 5 ms, one of 3 s in the bucket up to 5 s"
    )
    assert MinuteCount.objects.get(queue="reports").started == 1


def test_a_second_save_adds_to_the_minutes_row_and_a_save_with_nothing_writes_nothing(counts):
    counts.add(NOW, [("mail", minutes_module.DONE, 2)])
    counts.save("default", NOW)
    counts.add(NOW, [("mail", minutes_module.DONE, 3)])

    counts.save("default", NOW)
    with CaptureQueriesContext(connection) as queries:
        assert counts.save("default", NOW) == 0

    assert MinuteCount.objects.get().done == 5, "counts add up, never overwrite"
    assert len(queries) == 0, "an idle runner's heartbeat writes nothing"


def test_a_save_that_writes_deletes_the_minutes_older_than_keep(counts):
    MinuteCount.objects.create(minute=NOW - KEEP - timedelta(minutes=1), queue="q", runner="old")
    kept = MinuteCount.objects.create(
        minute=NOW - KEEP + timedelta(minutes=1), queue="q", runner="x"
    )
    counts.add(NOW, [("q", minutes_module.STARTED, 1)])

    counts.save("default", NOW)

    assert not MinuteCount.objects.filter(runner="old").exists(), "older than KEEP: deleted"
    assert MinuteCount.objects.filter(runner=kept.runner).exists(), "within KEEP: kept"


def test_a_process_that_never_saves_keeps_no_more_than_keep_of_minutes():
    counts = Minutes()
    counts.add(NOW - KEEP - timedelta(minutes=5), [("q", minutes_module.DONE, 1)])
    counts.add(NOW, [("q", minutes_module.DONE, 1)])

    assert list(counts._counts) == [(NOW.replace(second=0), "q")]


def test_the_hour_is_summed_per_minute_and_queue_over_every_runner_with_its_wait_quantiles():
    minute = NOW.replace(second=0) - timedelta(minutes=2)
    for runner, waits in (("a:1", {"wait_0": 50}), ("b:2", {"wait_0": 40, "wait_12": 10})):
        MinuteCount.objects.create(
            minute=minute, queue="mail", runner=runner, started=50, done=45, failed=5, **waits
        )
    MinuteCount.objects.create(
        minute=minute - timedelta(hours=1), queue="mail", runner="a:1", done=99
    )

    with CaptureQueriesContext(connection) as queries:
        [(queue, hour)] = read("default", NOW).items()

    assert len(queries) == 1
    assert queue == "mail"
    assert len(hour) == 60
    assert hour[-1].minute == NOW.replace(second=0)
    counted = hour[-3]
    assert (counted.started, counted.done, counted.failed) == (100, 90, 10)
    assert counted.p50 == pytest.approx(0.001 * 50 / 90), "p50 within the first bucket"
    assert counted.p95 == pytest.approx(20), "p95 halfway through the 10-30 s bucket"
    assert sum(m.done for m in hour) == 90, "the minute an hour before is not shown"


def test_quantiles_of_an_empty_minute_are_none_and_an_overflow_reads_as_the_last_bound():
    assert quantile([0] * 18, 0.5) is None
    assert quantile([0] * 17 + [4], 0.95) == 3600


@freeze_time(NOW)
def test_the_dashboard_draws_each_queues_charts_from_the_counts_not_the_jobs_table(admin_client):
    MinuteCount.objects.create(
        minute=NOW.replace(second=0), queue="mail", runner="a:1", started=7, done=6, failed=1
    )
    MinuteCount.objects.create(
        minute=NOW.replace(second=0), queue="reports", runner="a:1", started=2, wait_5=2
    )

    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(reverse("admin:jobs_dashboard")).content.decode()

    charts = dict(re.findall(r'data-queue="([^"]+)">(.*?)</div>', page, re.S))
    assert set(charts) == {"mail", "reports"}, "one pair of charts per queue"
    assert "7 started, 6 done and 1 failed" in charts["mail"]
    assert 'class="jobs-line-p50"' in charts["reports"], "the wait is drawn"
    assert "p50 (last 75 ms)" in charts["reports"], "two waits in the 50-100 ms bucket"
    counted = [q["sql"] for q in queries.captured_queries if "jobs_minutecount" in q["sql"]]
    assert len(counted) == 1, "one read of the counts"
    assert not any(
        "jobs_job" in q["sql"] and "TRUNC" in q["sql"].upper() for q in queries.captured_queries
    ), "no per-minute count over the jobs table"
