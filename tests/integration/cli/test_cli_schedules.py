"""`manage.py jobs schedules`: every schedule at a shell as the admin lists it,
disabling and enabling one as a named operator, an unknown name refused with
nothing written; and `jobs run-now --schedule NAME`."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from jobs.cli import default_by
from jobs.models import Job, Schedule
from jobs.registry import registry as jobs_registry
from jobs.schedules.reconcile import reconcile
from tests.integration.cli.test_cli import jobs
from tests.integration.runner.support import events

pytestmark = pytest.mark.django_db

NIGHTLY = {"kind": "test.record", "cron": "0 2 * * *", "timezone": "Europe/Paris"}


def in_paris(moment: datetime) -> str:
    """An instant as a Paris schedule's columns show it: where its cron reads it."""
    return moment.astimezone(ZoneInfo("Europe/Paris")).strftime("%Y-%m-%d %H:%M:%S %Z")


@pytest.fixture
def nightly(settings) -> Schedule:
    """A schedule as a runner's start leaves it: its row and its live occurrence."""
    settings.JOBS_SCHEDULES = {"nightly": NIGHTLY, "pulse": {"kind": "test.sleep", "every": 90}}
    reconcile(jobs_registry)
    return Schedule.objects.get(name="nightly")


def line_of(output: str, name: str) -> str:
    (line,) = [line for line in output.splitlines() if line.startswith(f"{name} ")]
    return line


def cells(output: str, name: str) -> list[str]:
    """The schedule `name`'s line, cut into its columns (two spaces or more apart)."""
    return re.split(r" {2,}", line_of(output, name))


def test_schedules_lists_each_with_expression_words_zone_next_and_last_fire_and_live_job(
    nightly,
):
    fired = timezone.now() - timedelta(days=1)
    Schedule.objects.filter(name="nightly").update(last_fire_at=fired, last_outcome="failed")
    live = Job.objects.get(key="schedule:nightly", live=True)

    status, said = jobs("schedules")

    assert status == 0
    assert said.splitlines()[0].split() == [
        *("NAME", "EXPRESSION", "IN", "WORDS", "ZONE", "NEXT", "FIRE", "LAST", "FIRE"),
        *("ENABLED", "LIVE"),
    ]
    name, expression, words, zone, next_fire, last_fire, enabled, job = cells(said, "nightly")
    assert (name, expression, words, zone) == (
        "nightly",
        "0 2 * * *",
        "At 02:00 every day",
        "Europe/Paris",
    )
    assert next_fire.startswith(in_paris(nightly.due_at)), "the next fire, in its zone"
    assert last_fire == f"{in_paris(fired)} (1d ago) failed", "the last fire time and its outcome"
    assert (enabled, job) == ("yes", f"{live.id} queued"), "enabled, and the live occurrence"
    assert cells(said, "pulse")[1:3] == ["every 90s", "Every 90 seconds"]


def test_schedules_json_gives_each_schedule_for_scripts(nightly):
    status, said = jobs("schedules", "--json")

    listed = {one["name"]: one for one in json.loads(said)}
    assert status == 0
    assert listed["nightly"]["words"] == "At 02:00 every day"
    assert (listed["nightly"]["zone"], listed["nightly"]["enabled"]) == ("Europe/Paris", True)
    assert listed["nightly"]["live_job"]["state"] == "queued"
    assert listed["pulse"]["expression"] == "every 90s"


def test_disable_and_enable_record_who_and_log_each_change(nightly, caplog):
    status, said = jobs("schedules", "disable", "nightly", "--by", "cli:alice")

    assert status == 0
    assert said.startswith("disabled schedule nightly (by cli:alice)")
    row = Schedule.objects.get(name="nightly")
    assert (row.enabled, row.changed_by) == (False, "cli:alice")
    assert cells(jobs("schedules")[1], "nightly")[6] == "no (by cli:alice)"

    status, said = jobs("schedules", "enable", "nightly")
    row.refresh_from_db()
    assert (status, row.enabled) == (0, True)
    assert row.changed_by == default_by(), "by the shell's user, as `jobs pause` is"
    assert said.startswith(f"enabled schedule nightly (by {row.changed_by})")
    changes = [line.getMessage() for line in events(caplog, "jobs_schedule_changed")]
    assert len(changes) == 2
    assert "enabled=False by=cli:alice" in changes[0]


@pytest.mark.parametrize("verb", ["disable", "enable"])
def test_an_unknown_schedule_is_refused_by_its_name_and_nothing_is_written(nightly, verb, caplog):
    before = list(Schedule.objects.values())

    with pytest.raises(CommandError, match="no schedule named 'nighlty'"):
        jobs("schedules", verb, "nighlty", "--by", "cli:alice")

    assert list(Schedule.objects.values()) == before
    assert not events(caplog, "jobs_schedule_changed")


def test_run_now_with_a_schedule_makes_its_live_occurrence_due_now(nightly):
    live = Job.objects.get(key="schedule:nightly", live=True)

    status, said = jobs("run-now", "--schedule", "nightly")

    live.refresh_from_db()
    assert (status, said.splitlines()[-1]) == (0, "1 touched")
    assert live.run_at <= timezone.now()
    with pytest.raises(CommandError, match="no schedule named 'nope'"):
        jobs("run-now", "--schedule", "nope")
