"""Who the admin turns away: every page and every operator action needs a staff
account holding the model permission, and nobody else touches a row.

test_admin.py and test_dashboard.py cover a staff viewer (view permission, no
change permission); here are the rest: nobody logged in, a user who holds every
jobs permission but is not staff, and a staff user who holds none.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.config import DEFAULTS, KEYS
from jobs.models import Job, JobsConfig, State
from tests import factories
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db


def anonymous(client: Client) -> Client:
    return client


def not_staff_with_every_permission(client: Client) -> Client:
    user = User.objects.create_user("outsider", password="pw", is_staff=False)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="jobs"))
    client.force_login(user)
    return client


def staff_without_permissions(client: Client) -> Client:
    client.force_login(User.objects.create_user("staff", password="pw", is_staff=True))
    return client


REFUSED = [
    pytest.param(anonymous, id="nobody-logged-in"),
    pytest.param(not_staff_with_every_permission, id="not-staff-though-holding-every-permission"),
    pytest.param(staff_without_permissions, id="staff-without-permissions"),
]


def make_job(key: str, state: str = State.QUEUED, **fields: Any) -> Job:
    """A row of the recorded kind, due in an hour."""
    return factories.make_job(key, state, run_at=timezone.now() + timedelta(hours=1), **fields)


def refused(response: Any) -> bool:
    """Sent to the login page, or forbidden: anything but the page itself."""
    if response.status_code == 302:
        return "/login/" in response["Location"]
    return response.status_code in (403, 404)


@pytest.mark.parametrize("who", REFUSED)
@pytest.mark.parametrize("action", ["run_now", "retry", "cancel"])
def test_an_operator_action_posted_by_someone_without_staff_and_permission_touches_nothing(
    client, who, action
):
    queued, failed = make_job("q"), make_job("f", state=State.FAILED, attempts=5)
    before = {job.id: (job.state, job.run_at, job.attempts) for job in (queued, failed)}
    user = who(client)
    for url in (
        reverse("admin:jobs_job_changelist"),
        reverse("admin:jobs_job_change", args=[queued.id]),
    ):
        response = user.post(
            url,
            {
                "action": action,
                "CHANGE_FORM-action": action,
                "_selected_action": [str(queued.id), str(failed.id)],
                "index": 0,
            },
        )
        assert refused(response), f"{action} posted to {url} is refused ({response.status_code})"
    after = {job.id: (job.state, job.run_at, job.attempts) for job in Job.objects.order_by("key")}
    assert after == before, f"{action} changed no row"
    assert Abandonment.objects.count() == 0, f"{action} abandoned nothing"


@pytest.mark.parametrize("who", REFUSED)
def test_the_dashboard_job_list_and_job_pages_are_refused_without_staff_and_permission(client, who):
    job = make_job("q")
    user = who(client)
    for name, args in (
        ("admin:jobs_dashboard", []),
        ("admin:jobs_job_changelist", []),
        ("admin:jobs_job_change", [job.id]),
        ("admin:jobs_runnerprocess_changelist", []),
    ):
        response = user.get(reverse(name, args=args))
        assert refused(response), f"{name} is refused ({response.status_code})"


@pytest.mark.parametrize("who", REFUSED)
def test_the_config_is_neither_shown_nor_changed_without_staff_and_permission(client, who):
    row = JobsConfig.load()
    before = row.as_settings()
    url = reverse("admin:jobs_jobsconfig_change", args=[row.pk])
    user = who(client)
    assert refused(user.get(url)), "the config page is refused"
    values = {name: getattr(DEFAULTS, name) for name in KEYS}
    values["max_concurrent"] = 50
    assert refused(user.post(url, values)), "a change posted to it is refused"
    assert JobsConfig.load().as_settings() == before, "and nothing was saved"
