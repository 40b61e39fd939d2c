"""A runner that stops beating is gone at once, everywhere, and then forgotten.

Gone means `RunnerProcess.MISSED_BEATS` (2) heartbeats of
`RunnerProcess.HEARTBEAT` (5 s) missed: silent for `STALE_AFTER` (10 s). A
gone runner runs nothing (its attempts died with it, or are another runner's
by now), so its last "running 1/8" is not counted; it is listed apart from
the live ones, and its row is deleted `FORGET_AFTER` (10 min) after its last
heartbeat by a live runner's beat (`jobs.runner.presence`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import RunnerProcess
from jobs.runner.presence import FORGET_EVERY, Presence
from jobs.stats import collect
from tests.integration.admin.support import as_read, make_runner, rows

pytestmark = pytest.mark.django_db


def test_gone_is_two_missed_heartbeats_and_one_late_beat_is_not():
    assert RunnerProcess.STALE_AFTER == 2 * RunnerProcess.HEARTBEAT == timedelta(seconds=10)
    now = timezone.now()
    late = make_runner("late", ["k"], silent_for=RunnerProcess.HEARTBEAT + timedelta(seconds=2))
    gone = make_runner("gone", ["k"], silent_for=RunnerProcess.STALE_AFTER + timedelta(seconds=1))
    assert not late.is_gone(now), "one beat late is a slow pass, not a dead runner"
    assert gone.is_gone(now), "a second beat missed is a runner gone, at once"


def test_a_gone_runner_counts_nothing_running_in_the_stats():
    now = timezone.now()
    for name, silent in (("live", timedelta(0)), ("gone", timedelta(minutes=3))):
        runner = make_runner(name, ["k"], silent_for=silent)
        RunnerProcess.objects.filter(pk=runner.pk).update(running=1, max_concurrent=8)
    running = {runner.hostname: runner.running for runner in collect(now=now).runners}
    assert running == {"live": 1, "gone": 0}, "what a gone runner last said is not work under way"


def test_the_runners_page_lists_live_runners_first_and_a_gone_ones_running_as_not_counted(
    admin_client,
):
    for name, silent in (("a-gone", timedelta(minutes=3)), ("z-live", timedelta(0))):
        runner = make_runner(name, ["k"], silent_for=silent)
        RunnerProcess.objects.filter(pk=runner.pk).update(running=1, max_concurrent=8)
    page = as_read(
        admin_client.get(reverse("admin:jobs_runnerprocess_changelist")).content.decode()
    )
    listed = [row for row in rows(page) if 'class="field-host"' in row]
    hosts = [row.split('class="field-host">')[1].split("<")[0] for row in listed]
    assert hosts == ["z-live", "a-gone"], "live runners first, gone ones after, not by host"
    live, gone = listed
    assert 'class="field-running_of">1 / 8<' in live
    assert ">0, not counted</span>" in gone, "a gone runner's last count is not shown as running"
    assert "missed heartbeats" in gone, "its badge says what gone means"
    gone_only = admin_client.get(reverse("admin:jobs_runnerprocess_changelist"), {"status": "gone"})
    assert "z-live" not in gone_only.content.decode(), "and gone ones can be listed alone"


def test_the_dashboard_lists_gone_runners_apart_from_the_live_ones(admin_client):
    for name, silent in (("a-gone", timedelta(minutes=3)), ("z-live", timedelta(0))):
        runner = make_runner(name, ["k"], silent_for=silent)
        RunnerProcess.objects.filter(pk=runner.pk).update(running=1, max_concurrent=8)
    page = admin_client.get(reverse("admin:jobs_dashboard")).content.decode()
    runners = page.split("<caption>Runners (1 live)</caption>")[1].split("</table>")[0]
    live, gone = runners.split('<tbody class="jobs-runners-gone">')
    assert "z-live" in live, "the live ones first"
    assert "a-gone" not in live, "alone"
    assert "a-gone" in gone, "the gone ones in a section of their own"
    assert "1 / 8" in live
    assert "not counted" in gone, "a gone runner's running is not counted"
    assert "1 / 8" not in gone, "nor shown as running"


def test_a_live_runners_beat_forgets_runners_gone_past_forget_after():
    now = timezone.now()
    clock = [now]
    old = make_runner("old", ["k"], silent_for=RunnerProcess.FORGET_AFTER + timedelta(seconds=1))
    recent = make_runner(
        "recent", ["k"], silent_for=RunnerProcess.FORGET_AFTER - timedelta(minutes=1)
    )
    presence = Presence("default", lambda: clock[0])
    presence.register(["k"], 4)
    left = set(RunnerProcess.objects.values_list("hostname", flat=True))
    assert old.hostname not in left, "forgotten at the start of a runner"
    assert recent.hostname in left, "a runner gone for less than FORGET_AFTER is still listed"

    clock[0] = now + FORGET_EVERY + timedelta(minutes=1)
    presence.beat(0, 4)
    left = set(RunnerProcess.objects.values_list("hostname", flat=True))
    assert recent.hostname not in left, "forgotten by a live runner's beat, not only at a start"
    assert presence.row is not None
    assert RunnerProcess.objects.filter(pk=presence.row.pk).exists(), "never the beating one"
