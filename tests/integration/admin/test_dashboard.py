"""The admin's runners and dashboard: which runners are live and which are gone, the
queue's numbers and throughput, and the kinds no live runner can run."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.models import MinuteCount, RunnerProcess, State
from tests.factories import make_job
from tests.integration.admin.support import as_read, changelist, make_runner, rows

pytestmark = pytest.mark.django_db


def test_the_runner_list_says_which_runners_are_live_and_which_are_gone(admin_client):
    make_runner("alive-host", ["a"])
    make_runner("dead-host", ["b"], silent_for=timedelta(minutes=3))
    response = admin_client.get(reverse("admin:jobs_runnerprocess_changelist"))
    page = response.content.decode()
    alive = next(row for row in rows(page) if "alive-host" in row)
    dead = next(row for row in rows(page) if "dead-host" in row)
    assert 'jobs-badge-live">live<' in alive, "a runner that reports itself is live"
    assert 'jobs-badge-gone">gone<' in dead, "a runner silent for minutes is gone"
    assert ">3 min ago<" in dead, "the last heartbeat is shown relative to now"


def test_runners_cannot_be_added_or_edited_but_a_gone_one_can_be_deleted(admin_client):
    runner = make_runner("dead-host", ["b"], silent_for=timedelta(minutes=3))
    assert admin_client.get(reverse("admin:jobs_runnerprocess_add")).status_code == 403
    change = reverse("admin:jobs_runnerprocess_change", args=[runner.id])
    assert admin_client.post(change, {"hostname": "x"}).status_code == 403
    delete = reverse("admin:jobs_runnerprocess_delete", args=[runner.id])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not RunnerProcess.objects.exists(), "clearing a gone runner is allowed"


def dashboard(client: Client) -> str:
    response = client.get(reverse("admin:jobs_dashboard"))
    assert response.status_code == 200
    return response.content.decode()


def test_the_dashboard_shows_the_queues_numbers_to_a_viewer(viewer_client):
    now = timezone.now()
    for n in range(3):
        make_job(f"done-{n}", state=State.DONE, finished_at=now - timedelta(minutes=1))
    for n in range(2):
        make_job(f"failed-{n}", state=State.FAILED, finished_at=now - timedelta(minutes=2))
    for n in range(4):
        make_job(f"older-{n}", state=State.DONE, finished_at=now - timedelta(minutes=30))
    make_job("waiting", run_at=now - timedelta(minutes=7, seconds=10), kind="slow.kind")
    make_runner("worker-1", ["slow.kind"])
    page = dashboard(viewer_client)
    done = re.search(r'jobs-recent-done">.*?<td[^>]*>(\d+)</td>\s*<td[^>]*>(\d+)</td>', page, re.S)
    failed = re.search(
        r'jobs-recent-failed">.*?<td[^>]*>(\d+)</td>\s*<td[^>]*>(\d+)</td>', page, re.S
    )
    assert done is not None, "the dashboard has a row for done jobs"
    assert done.groups() == ("3", "7"), "done: 3 in the last 5 minutes, 7 in the hour"
    assert failed is not None, "the dashboard has a row for failed jobs"
    assert failed.groups() == ("2", "2"), "failed: 2 in the last 5 minutes and in the hour"
    assert "waited 7 min past its run_at" in page, "the queue lag is the oldest ready job's wait"
    assert ">slow.kind</a>" in page, "live jobs are listed by kind"


def test_the_dashboard_draws_the_last_hours_throughput_as_an_accessible_svg(admin_client):
    minute = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=1)
    MinuteCount.objects.create(minute=minute, queue="default", runner="h:1", started=1, done=1)
    page = dashboard(admin_client)
    assert '<svg class="jobs-chart jobs-chart-counts"' in page, "the chart is inline SVG"
    assert '<title id="jobs-counts-title-1">' in page, "the chart has a title for screen readers"
    assert 'class="jobs-bar-done"' in page, "the done job is drawn as a bar"
    content = page.split('<div id="content-main">')[1]
    assert "<script" not in content, "the dashboard itself needs no JavaScript"


def test_the_dashboard_lists_runners_with_the_gone_ones_marked(admin_client):
    make_runner("alive-host", ["a"])
    make_runner("dead-host", ["b"], silent_for=timedelta(minutes=5))
    page = dashboard(admin_client)
    dead = next(row for row in rows(page) if "dead-host" in row)
    alive = next(row for row in rows(page) if "alive-host" in row)
    assert 'jobs-badge-gone">gone<' in dead, "a silent runner is marked gone"
    assert 'jobs-badge-live">live<' in alive, "a reporting runner is marked live"


def test_the_lanes_of_one_process_are_listed_by_lane_and_counted_as_one_live_runner(
    admin_client,
):
    for lane in range(2):
        make_runner("laned-host", ["a"], pid=4242, lane=lane, lanes=2)
    make_runner("plain-host", ["a"])
    page = dashboard(admin_client)
    laned = [row for row in rows(page) if "laned-host" in row]
    assert ["lane 0 of 2" in laned[0], "lane 1 of 2" in laned[1]] == [True, True], laned
    assert "Runners (2 live)" in page, "one process with two lanes is one runner"
    listed = admin_client.get(reverse("admin:jobs_runnerprocess_changelist")).content.decode()
    assert "lane 1 of 2" in listed, "the runner list names each lane"
    plain = next(row for row in rows(listed) if "plain-host" in row)
    assert "lane" not in plain.replace('class="field-lane_shown"', ""), "one lane shows none"


def test_the_runner_list_shows_each_child_of_a_supervisor_under_its_pid_grouped_by_host(
    admin_client,
):
    """`runjobs --processes`: each child shows its supervisor's pid under its
    own, listed together host by host; a runner on its own shows none."""
    make_runner("b-host", ["a"], pid=30, supervisor_pid=900)
    make_runner("a-host", ["a"], pid=12, supervisor_pid=800)
    make_runner("b-host", ["a"], pid=20, supervisor_pid=700)
    make_runner("a-host", ["a"], pid=11, supervisor_pid=800)
    make_runner("b-host", ["a"], pid=10, supervisor_pid=900)
    make_runner("c-host", ["a"], pid=5)
    page = as_read(
        admin_client.get(reverse("admin:jobs_runnerprocess_changelist")).content.decode()
    )

    listed = [
        re.findall(
            r'class="field-host">(?:<a [^>]*>)?([^<]*)<.*?class="field-pid_shown">(\d+)'
            r'(?:<br><span class="jobs-quiet jobs-supervisor">supervisor (\d+)</span>)?',
            row,
        )[0]
        for row in rows(page)
        if "field-pid_shown" in row
    ]
    shown = [(host, supervisor or "—", pid) for host, pid, supervisor in listed]
    assert shown == [
        ("a-host", "800", "11"),
        ("a-host", "800", "12"),
        ("b-host", "700", "20"),
        ("b-host", "900", "10"),
        ("b-host", "900", "30"),
        ("c-host", "—", "5"),
    ], "ordered by host, then supervisor pid, then pid; none shown for a runner on its own"


def test_the_dashboard_flags_kinds_no_live_runner_can_run(admin_client):
    make_runner("alive-host", ["handled"])
    make_job("a", kind="handled")
    make_job("b", kind="orphaned")
    page = dashboard(admin_client)
    orphaned = next(row for row in rows(page) if ">orphaned</a>" in row)
    handled = next(row for row in rows(page) if ">handled</a>" in row)
    assert "no live runner" in orphaned, "a kind nobody can run is flagged"
    assert "no live runner" not in handled


def test_the_dashboard_needs_permission_to_view_jobs(client):
    client.force_login(User.objects.create_user("staff", password="pw", is_staff=True))
    assert client.get(reverse("admin:jobs_dashboard")).status_code == 403


def test_the_app_index_and_the_job_list_link_to_the_dashboard(viewer_client):
    url = reverse("admin:jobs_dashboard")
    index = viewer_client.get(reverse("admin:app_list", args=["jobs"])).content.decode()
    assert f'href="{url}"' in index, "the jobs app's index links to the dashboard"
    assert f'href="{url}"' in changelist(viewer_client), "so does the job list"


def tile(page: str, name: str) -> tuple[str, str]:
    """The dashboard's headline tile `name`: its opening tag and its text."""
    found = re.search(
        rf'(<(?:div|a) class="jobs-figure jobs-figure-{name}[^>]*>)(.*?)</(?:div|a)>', page, re.S
    )
    assert found is not None, f"the dashboard has a {name} tile"
    return found.group(1), " ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split())


def kind_row(page: str, kind: str) -> dict[str, str]:
    """The kinds table's figures for `kind`."""
    row = next(row for row in rows(page) if f">{kind}</a>" in row)
    return dict(re.findall(r'class="jobs-num jobs-kind-(\w+)">([^<]*)<', row))


def test_the_lag_is_the_wait_of_the_oldest_due_job_whatever_holds_it(admin_client):
    now = timezone.now()
    make_runner("worker", ["handled"])
    make_job("handled-1", kind="handled", run_at=now - timedelta(minutes=7, seconds=5))
    make_job("orphaned-1", kind="orphaned", run_at=now - timedelta(hours=3))
    page = dashboard(admin_client)
    tag, text = tile(page, "lag")
    assert text == "3 h queue lag: the wait of the oldest due job", (
        "the lag counts the 3 hours of the job nobody can run, not only the handled one's"
    )
    assert "jobs-alarm" in tag
    waiting = re.search(r'<tr class="jobs-waiting-runner">(.*?)</tr>', page, re.S)
    assert waiting is not None, "the jobs held for want of a runner are broken out"
    assert re.findall(r"<td[^>]*>([^<]*)</td>", waiting.group(1)) == ["1", "3 h ago"]


def test_ready_jobs_no_live_runner_handles_are_their_own_tile(admin_client):
    now = timezone.now()
    make_runner("worker", ["handled"])
    make_runner("dead", ["only.dead"], silent_for=timedelta(minutes=5))
    make_job("handled-1", kind="handled", run_at=now - timedelta(minutes=1))
    make_job("dead-1", kind="only.dead", run_at=now - timedelta(minutes=10, seconds=20))
    make_job("nobody-1", kind="nobody", run_at=now - timedelta(minutes=2))
    make_job("nobody-later", kind="nobody", run_at=now + timedelta(hours=1))  # not ready
    page = dashboard(admin_client)
    tag, text = tile(page, "unhandled")
    assert text == "2 jobs waiting for a runner: oldest due 10 min ago"
    assert "jobs-alarm" in tag, "jobs nobody can run are an alarm"
    url = re.search(r'href="([^"]+)"', tag)
    assert url is not None, "the tile links to the jobs"
    listed = as_read(admin_client.get(html.unescape(url.group(1))).content.decode())
    assert set(re.findall(r'<th class="field-key_shown"><a href="[^"]+">([^<]*)</a>', listed)) == {
        "dead-1",
        "nobody-1",
        "nobody-later",
    }, "the link is the job list filtered to jobs waiting for a handler"


def test_running_is_shown_as_healthy_running_with_the_stuck_apart(admin_client):
    now = timezone.now()
    live = make_runner("live-host", ["a"])
    gone = make_runner("gone-host", ["a"], silent_for=timedelta(minutes=2))
    for n in range(2):
        make_job(f"healthy-{n}", state=State.RUNNING, claimed_by=live.name)
    make_job("orphan", state=State.RUNNING, claimed_by=gone.name)
    make_job("expired", state=State.RUNNING, claimed_by=live.name, lease_expires_at=now)
    page = dashboard(admin_client)
    assert tile(page, "running")[1] == "2 running, healthy", (
        "only the healthy ones count as running"
    )
    tag, text = tile(page, "stuck")
    assert text == "2 stuck: runner gone or lease expired"
    assert "jobs-alarm" in tag, "stuck jobs are shown in red"
    url = re.search(r'href="([^"]+)"', tag)
    assert url is not None, "the stuck figure links to the jobs"
    listed = as_read(admin_client.get(html.unescape(url.group(1))).content.decode())
    assert set(re.findall(r'<th class="field-key_shown"><a href="[^"]+">([^<]*)</a>', listed)) == {
        "orphan",
        "expired",
    }, "the link is the job list's stuck filter"


def test_no_stuck_job_is_no_alarm(admin_client):
    live = make_runner("live-host", ["a"])
    make_job("healthy", state=State.RUNNING, claimed_by=live.name)
    tag, text = tile(dashboard(admin_client), "stuck")
    assert text.startswith("0 stuck")
    assert "jobs-alarm" not in tag


def test_each_kind_shows_its_done_and_failed_of_the_last_hour_even_with_no_live_rows(
    admin_client,
):
    now = timezone.now()
    for n in range(3):
        make_job(f"a-done-{n}", kind="settled.only", state=State.DONE, finished_at=now)
    make_job("a-failed", kind="settled.only", state=State.FAILED, finished_at=now)
    make_job("a-old", kind="settled.only", state=State.DONE, finished_at=now - timedelta(hours=2))
    make_job("a-cancelled", kind="settled.only", state=State.CANCELLED, finished_at=now)
    make_job("b-queued", kind="live.only")
    page = dashboard(admin_client)
    assert kind_row(page, "settled.only") == {
        "queued": "0",
        "running": "0",
        "done": "3",
        "failed": "1",
    }, "a kind with nothing live still shows its hour: 3 done, 1 failed"
    assert kind_row(page, "live.only") == {
        "queued": "1",
        "running": "0",
        "done": "0",
        "failed": "0",
    }
