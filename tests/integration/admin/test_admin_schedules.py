"""The admin's Schedules page: every schedule with its timing in words, when it
fires next and how its last occurrence ended; disabling, enabling and running
one now as an operator does it, stamped and logged with the admin user; and
nothing else written, since the rows belong to the runners' reconcile."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from jobs.models import Job, Schedule, State
from jobs.registry import registry as jobs_registry
from jobs.schedules.reconcile import reconcile
from tests import factories
from tests.integration.admin.support import messages_of, rows
from tests.integration.runner.support import events

pytestmark = pytest.mark.django_db

LIST = "/admin/jobs/schedule/"

NIGHTLY = {"kind": "test.record", "cron": "0 2 * * *", "timezone": "Europe/Paris"}


def in_paris(moment: datetime) -> str:
    """An instant as a Paris schedule's columns show it: where its cron reads it."""
    return moment.astimezone(ZoneInfo("Europe/Paris")).strftime("%Y-%m-%d %H:%M:%S %Z")


PULSE = {"kind": "test.sleep", "every": 90}


@pytest.fixture
def schedules(settings) -> dict[str, Schedule]:
    """Two schedules (beside the sweep's own) as a runner's start leaves them: rows
    and live occurrences."""
    settings.JOBS_SCHEDULES = {"nightly": NIGHTLY, "pulse": PULSE}
    reconcile(jobs_registry)
    return {row.name: row for row in Schedule.objects.all()}


def live_job(name: str) -> Job:
    return Job.objects.get(key=f"schedule:{name}", live=True)


def row_of(page: str, name: str) -> str:
    (found,) = [row for row in rows(page) if f'value="{name}"' in row]
    return found


def text_of(row: str) -> str:
    """A row as the operator reads it: tags gone, a cell's end or a line break a space."""
    return " ".join(strip_tags(re.sub(r"<br>|</td>|</th>", " ", row)).split())


def act(client: Client, action: str, *names: str):
    return client.post(
        LIST, {"action": action, "_selected_action": list(names), "index": 0}, follow=True
    )


def staff(client: Client, *codenames: str) -> Client:
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


def test_the_list_shows_each_schedules_expression_words_zone_next_fire_enabled_and_live_job(
    admin_client, schedules
):
    page = admin_client.get(LIST).content.decode()

    nightly = row_of(page, "nightly")
    assert "<code>0 2 * * *</code>" in nightly
    said = text_of(nightly)
    assert "0 2 * * * At 02:00 every day Europe/Paris" in said, "expression, words, zone"
    assert in_paris(schedules["nightly"].due_at) in said, "the next fire, in its zone"
    assert "icon-yes" in nightly, "enabled, as the admin's boolean icon"
    job = live_job("nightly")
    assert reverse("admin:jobs_job_change", args=[job.id]) in nightly
    assert "jobs-badge-queued" in nightly, "the live occurrence's state"
    pulse = row_of(page, "pulse")
    assert "every 90s Every 90 seconds —" in text_of(pulse)


def test_the_last_fire_shows_its_outcome_linking_to_its_job_only_while_that_row_exists(
    admin_client, schedules
):
    fired = timezone.now() - timedelta(days=1)
    ran = factories.make_job("schedule:nightly", state=State.DONE, kind="test.record")
    Schedule.objects.filter(name="nightly").update(
        last_fire_at=fired, last_outcome="done", last_job_id=ran.id
    )
    Schedule.objects.filter(name="pulse").update(
        last_fire_at=fired, last_outcome="failed", last_job_id=factories.make_job("x").id
    )
    Job.objects.filter(key="x").delete()  # swept since

    page = admin_client.get(LIST).content.decode()

    nightly, pulse = row_of(page, "nightly"), row_of(page, "pulse")
    assert f"{in_paris(fired)} 1 d ago done" in text_of(nightly)
    assert "jobs-badge-done" in nightly
    assert reverse("admin:jobs_job_change", args=[ran.id]) in nightly
    assert "jobs-badge-failed" in pulse
    assert pulse.count('href="/admin/jobs/job/') == 1, "only the live occurrence is linked"


def test_the_list_reads_the_live_occurrences_once_per_page_not_once_per_schedule(
    admin_client, settings
):
    def queries_for_the_list(count: int) -> int:
        settings.JOBS_SCHEDULES = {f"s{n}": PULSE for n in range(count)}
        reconcile(jobs_registry)
        with CaptureQueriesContext(connection) as seen:
            assert admin_client.get(LIST).status_code == 200
        return len(seen)

    assert queries_for_the_list(1) == queries_for_the_list(5)


def test_the_disable_action_stamps_the_admin_user_and_logs_the_change(
    admin_client, schedules, caplog
):
    response = act(admin_client, "disable_selected", "nightly")

    row = Schedule.objects.get(name="nightly")
    assert (row.enabled, row.changed_by) == (False, "admin:ops")
    assert row.changed_at is not None
    assert Schedule.objects.get(name="pulse").enabled, "the unselected schedule is untouched"
    (line,) = events(caplog, "jobs_schedule_changed")
    assert "schedule=nightly enabled=False by=admin:ops" in line.getMessage()
    assert any(said.startswith("Disabled: nightly") for said in messages_of(response))
    assert "icon-no" in row_of(response.content.decode(), "nightly")


def test_the_enable_action_enables_a_disabled_schedule_again_as_the_admin_user(
    admin_client, schedules
):
    Schedule.objects.filter(name="pulse").update(enabled=False, changed_by="cli:alice")

    response = act(admin_client, "enable_selected", "pulse")

    row = Schedule.objects.get(name="pulse")
    assert (row.enabled, row.changed_by) == (True, "admin:ops")
    assert any(said.startswith("Enabled: pulse") for said in messages_of(response))


def test_a_user_who_may_only_view_schedules_sees_them_but_cannot_disable_one(client, schedules):
    viewer = staff(client, "view_schedule")

    page = viewer.get(LIST).content.decode()
    assert "nightly" in page
    assert "disable_selected" not in page, "no action is offered"
    act(viewer, "disable_selected", "nightly")

    row = Schedule.objects.get(name="nightly")
    assert (row.enabled, row.changed_by) == (True, "")


def test_the_admin_adds_edits_and_deletes_no_schedule(admin_client, schedules):
    change = reverse("admin:jobs_schedule_change", args=["nightly"])
    page = admin_client.get(change).content.decode()

    assert admin_client.get(reverse("admin:jobs_schedule_add")).status_code == 403
    assert 'name="_save"' not in page, "a schedule's page is read-only"
    assert "At 02:00 every day" in page
    assert admin_client.post(change, {"enabled": ""}).status_code == 403
    assert (
        admin_client.get(reverse("admin:jobs_schedule_delete", args=["nightly"])).status_code == 403
    )
    act(admin_client, "delete_selected", "nightly", "pulse")
    assert Schedule.objects.count() == len(schedules)
    assert Schedule.objects.get(name="nightly").enabled


def test_run_now_makes_the_selected_schedules_queued_occurrence_due_now(admin_client, schedules):
    job, other = live_job("nightly"), live_job("pulse")

    response = act(admin_client, "run_now", "nightly")

    job.refresh_from_db()
    due_at = Schedule.objects.get(name="nightly").due_at
    assert due_at is not None
    assert job.run_at <= timezone.now() < due_at
    assert messages_of(response) == ["Run now: 1 touched."]
    assert live_job("pulse").run_at == other.run_at, "the unselected schedule's is untouched"
