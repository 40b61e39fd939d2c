"""What a queued job waits for, said per job (`jobs show`, the job's page) and
in totals (`jobs stats`, the dashboard, `jobs_waiting_jobs`), and the lag
counting every due job whatever holds it.

Each hold is set up the way an operator meets it: a runner that serves
another queue, a kind at its concurrency limit, a paused queue, a disabled
schedule, a job not due yet."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta
from functools import partial

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import controls
from jobs.metrics.database import TableCollector
from jobs.models import Job, Schedule, State
from jobs.stats import collect
from jobs.waiting import REASONS
from tests import factories
from tests.integration.cli.test_cli import jobs

pytestmark = pytest.mark.django_db

make_job = partial(factories.make_job, kind="k", finished=False, leased=False)


def live_runner(queues: list[str] | None = None, kinds: list[str] | None = None) -> str:
    row = factories.make_runner_row("worker", kinds or ["k"], timezone.now(), queues)
    return row.name


def behind_a_full_limit() -> None:
    """Two due jobs of kind k behind its limit of 1, which one running job fills."""
    name = live_runner()
    controls.set_limit("k", "test:operator", 1)
    make_job("running", state=State.RUNNING, claimed_by=name, leased=True)
    now = timezone.now()
    make_job("first", run_at=now - timedelta(minutes=3))
    make_job("second", run_at=now - timedelta(minutes=1))


def test_two_due_jobs_behind_a_full_concurrency_limit_are_the_lag_and_wait_for_the_limit():
    behind_a_full_limit()

    stats = collect()

    assert stats.lag_seconds == pytest.approx(180, abs=5), "held jobs count in the lag"
    assert stats.waiting["limit"]["jobs"] == 2
    assert stats.waiting["ready"]["jobs"] == 0, "nothing but the limit holds them"
    output = jobs("stats")[1]
    assert re.search(r"^Lag: 3m ", output, re.M), output
    assert re.search(r"^  limit: +2 jobs +\(a limit\) +oldest due 3m ago$", output, re.M), output


def held(reason: str) -> Job:
    """One job held by `reason` alone (and, for a limit, a running job filling it)."""
    now = timezone.now()
    if reason == "runner":
        live_runner(queues=["emails"])
        return make_job("held", queue="reports", run_at=now - timedelta(minutes=2))
    if reason == "limit":
        behind_a_full_limit()
        return Job.objects.get(key="first")
    live_runner()
    if reason == "pause":
        controls.pause("queue", "reports", "test:operator")
        return make_job("held", queue="reports", run_at=now - timedelta(minutes=2))
    if reason == "schedule":
        Schedule.objects.create(name="nightly", kind="k", definition={}, enabled=False)
        return make_job("schedule:nightly", run_at=now + timedelta(hours=1))
    assert reason == "run_at"
    return make_job("held", run_at=now + timedelta(hours=1))


#: What `jobs show` and the job's page say of each hold.
SAID = {
    "runner": "a runner (no live runner serves kind k in queue reports)",
    "limit": "a limit (kind k has 1 running, its limit is 1)",
    "pause": "a pause (queue reports is paused)",
    "schedule": "its schedule (nightly is disabled: skipped, unrun, when due)",
    "run_at": "its run_at (due in 59m 59s)",
}


@pytest.mark.parametrize("reason", ["runner", "limit", "pause", "schedule", "run_at"])
def test_show_and_the_jobs_page_say_what_holds_the_job(reason, admin_client):
    job = held(reason)

    shown = jobs("show", str(job.id))[1]
    page = html.unescape(
        admin_client.get(reverse("admin:jobs_job_change", args=[job.id])).content.decode()
    )
    as_json = json.loads(jobs("show", str(job.id), "--json")[1])

    [line] = [line for line in shown.splitlines() if line.startswith("waiting:")]
    said = SAID[reason]
    if reason == "run_at":  # the clock may have moved on by a second
        said = said.split("(due")[0]
    assert said in line, line
    assert said in page, "the job's page says it too"
    assert as_json["waiting"][0]["reason"] == reason, (
        "the first hold is the one it is counted under"
    )


def test_a_due_job_nothing_holds_is_said_to_wait_for_a_free_slot():
    live_runner()
    job = make_job("free", run_at=timezone.now() - timedelta(seconds=5))

    shown = jobs("show", str(job.id))[1]

    assert "waiting: nothing holds it: it waits for a free slot" in " ".join(shown.split())


def test_a_running_job_of_a_paused_queue_whose_runner_died_says_the_pause_holds_its_reclaim():
    """ "runner gone" alone hid that no runner will take it back while the queue is paused."""
    live_runner()
    gone = factories.make_runner_row("dead", ["k"], timezone.now() - timedelta(minutes=5))
    controls.pause("queue", "reports", "test:operator")
    job = make_job(
        "orphan",
        state=State.RUNNING,
        queue="reports",
        claimed_by=gone.name,
        attempts=1,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )

    shown = jobs("show", str(job.id))[1]

    assert f"{gone.name} (runner gone)" in shown
    [line] = [line for line in shown.splitlines() if line.startswith("waiting:")]
    assert "a pause (queue reports is paused)" in line, line


def test_the_stats_the_dashboard_and_the_metric_give_the_same_numbers(admin_client):
    now = timezone.now()
    held("limit")
    controls.pause("queue", "paused", "test:operator")
    make_job("p1", queue="paused", run_at=now - timedelta(minutes=9))
    make_job("nobody", kind="other", run_at=now - timedelta(minutes=20))
    make_job("later", kind="k", run_at=now + timedelta(minutes=20))
    make_job("free", kind="free", run_at=now - timedelta(seconds=30))
    live_runner(kinds=["free"])

    stats = collect()
    families = {family.name: family for family in TableCollector().collect()}
    page = admin_client.get(reverse("admin:jobs_dashboard")).content.decode()

    metric = {
        (s.labels["queue"], s.labels["reason"]): s.value
        for s in families["jobs_waiting_jobs"].samples
    }
    from_stats = {
        (queue, reason): counts[reason]["jobs"]
        for queue, counts in stats.waiting_by_queue.items()
        for reason in REASONS
    }
    assert metric == from_stats, "the metric and the stats count the same rows"
    lag = {s.labels["queue"]: s.value for s in families["jobs_queue_lag_seconds"].samples}
    assert max(lag.values()) == pytest.approx(stats.lag_seconds, abs=2)
    totals = {reason: stats.waiting[reason]["jobs"] for reason in REASONS}
    assert totals == {
        "schedule": 0,
        "run_at": 1,
        "pause": 1,
        "runner": 1,
        "limit": 2,
        "ready": 1,
    }
    for reason, n in totals.items():
        row = re.search(rf'<tr class="jobs-waiting-{reason}">(.*?)</tr>', page, re.S)
        if not n:
            assert row is None, f"no {reason} row when nothing waits for it"
            continue
        assert row is not None
        assert re.findall(r'<td class="jobs-num">([^<]*)</td>', row.group(1))[0] == str(n)
