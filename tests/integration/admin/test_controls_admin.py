"""The admin's controls page: pausing, resuming and limiting as an operator does
it in a browser, stamped and logged with the admin user; what a runner could
not use is refused by the form and never saved; the dashboard shows it."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from jobs.models import Control
from tests.integration.runner.support import events

pytestmark = pytest.mark.django_db

ADD = "/admin/jobs/control/add/"


def test_adding_a_pause_in_the_admin_stamps_and_logs_the_admin_user(admin_client, caplog):
    response = admin_client.post(
        ADD, {"scope": "queue", "name": "emails", "paused": "on", "concurrency_limit": ""}
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    row = Control.objects.get()
    assert (row.scope, row.name, row.paused, row.changed_by) == (
        "queue",
        "emails",
        True,
        "admin:ops",
    )
    (line,) = events(caplog, "jobs_control_changed")
    assert "queue=emails by=admin:ops paused=True" in line.getMessage()


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"scope": "queue", "name": "mail queue"}, "letters, digits"),
        ({"scope": "queue", "name": "emails", "concurrency_limit": "3"}, "a queue has no"),
        ({"scope": "kind", "name": "orders.relay", "concurrency_limit": "-1"}, "must be"),
    ],
)
def test_a_control_no_runner_could_use_is_refused_by_the_form(admin_client, fields, said):
    response = admin_client.post(ADD, {"concurrency_limit": "", **fields})

    assert response.status_code == 200, "the form comes back with the error"
    assert said in response.content.decode()
    assert not Control.objects.exists()


def test_the_pause_and_resume_actions_change_the_selected_rows_as_the_admin_user(admin_client):
    row = Control.objects.create(scope="kind", name="orders.relay", changed_at="2030-01-01T00:00Z")

    admin_client.post(
        "/admin/jobs/control/", {"action": "pause_selected", "_selected_action": [row.pk]}
    )
    row.refresh_from_db()
    assert (row.paused, row.changed_by) == (True, "admin:ops")

    admin_client.post(
        "/admin/jobs/control/", {"action": "resume_selected", "_selected_action": [row.pk]}
    )
    row.refresh_from_db()
    assert not row.paused


def test_the_dashboard_lists_what_is_paused_and_by_whom(admin_client):
    admin_client.post(ADD, {"scope": "queue", "name": "emails", "paused": "on"})

    page = admin_client.get(reverse("admin:jobs_dashboard")).content.decode()

    assert "Paused and limited" in page
    assert "<code>emails</code>" in page
    assert "admin:ops" in page


def test_adding_a_control_a_row_already_holds_writes_onto_that_row_and_says_so(
    admin_client, caplog
):
    """The CLI (or another tab) may have left a row for the queue; Add control
    then changes it, saying what it said, instead of a uniqueness error."""
    Control.objects.create(
        scope="queue", name="emails", changed_by="cli:alice", changed_at="2030-01-01T00:00Z"
    )

    response = admin_client.post(
        ADD, {"scope": "queue", "name": "emails", "paused": "on", "concurrency_limit": ""},
        follow=True,
    )  # fmt: skip

    page = response.content.decode()
    assert "already exists" not in page, "no uniqueness error"
    assert (
        "Queue emails already had a control (not paused; changed by cli:alice at "
        "2030-01-01T00:00:00+00:00), so this form&#x27;s values were written onto it"
    ) in page, page[:3000]
    row = Control.objects.get()
    assert (row.paused, row.changed_by) == (True, "admin:ops")
    assert (
        "queue=emails by=admin:ops paused=True"
        in events(caplog, "jobs_control_changed")[0].getMessage()
    )
    (entry,) = LogEntry.objects.all()
    assert (entry.action_flag, entry.get_change_message()) == (CHANGE, "Changed Paused."), (
        "the row's history shows the change it was, not an addition"
    )


def test_add_control_where_a_row_exists_needs_the_permission_to_change_it(client):
    user = User.objects.create_user("adder", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_control"))
    client.force_login(user)
    Control.objects.create(scope="queue", name="emails", changed_at="2030-01-01T00:00Z")

    response = client.post(ADD, {"scope": "queue", "name": "emails", "paused": "on"})

    assert response.status_code == 200, "the form comes back with the reason"
    assert "needs the permission to change controls" in response.content.decode()
    assert not Control.objects.get().paused, "nothing was written"
