"""`jobs.metrics.views.metrics`: the table's gauges for Prometheus, never
open: a bearer token from settings or a user with `jobs.view_job` reads them,
anyone else is refused and learns nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs import JobSpec, enqueue
from jobs.models import Control, Job, RunnerProcess

pytestmark = pytest.mark.django_db

URL = "/metrics/jobs"
TOKEN = "s3cret-scrape-token-0123456789"


@pytest.fixture
def token(settings):
    settings.JOBS_METRICS_TOKEN = TOKEN


def gauges(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def test_an_anonymous_request_is_refused_with_a_bearer_challenge_and_no_numbers(client, token):
    response = client.get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"jobs_ready" not in response.content


def test_a_wrong_token_is_refused(client, token):
    response = client.get(URL, headers={"Authorization": "Bearer not-the-token"})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]
    assert b"jobs_ready" not in response.content


def test_a_token_is_refused_when_settings_configure_none(client, settings):
    settings.JOBS_METRICS_TOKEN = ""
    assert client.get(URL, headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get(URL, headers={"Authorization": "Bearer x"}).status_code == 401


def test_a_signed_in_user_without_the_permission_is_forbidden(client):
    client.force_login(User.objects.create_user("clerk"))
    assert client.get(URL).status_code == 403


def test_a_user_with_view_job_reads_the_gauges(client):
    user = User.objects.create_user("operator")
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    response = client.get(URL)
    assert response.status_code == 200
    assert ("jobs_live_runners", ()) in gauges(response.content)


def test_the_right_token_reads_each_queue_s_ready_count_and_lag_the_stuck_and_the_runners(
    client, token
):
    now = timezone.now()
    assert enqueue(JobSpec.now("view.a", "a1").with_queue("mail"))
    assert enqueue(JobSpec.now("view.a", "a2").with_queue("mail"))
    assert enqueue(JobSpec.now("view.a", "later").with_delay(timedelta(hours=1)))
    Job.objects.filter(key="a1").update(run_at=now - timedelta(seconds=90))
    assert enqueue(JobSpec.now("view.b", "held"))
    Job.objects.filter(key="held").update(
        state="running", claimed_by="gone-host:1", lease_expires_at=now + timedelta(hours=1)
    )
    RunnerProcess.objects.create(
        hostname="here",
        pid=1,
        version="x",
        max_concurrent=8,
        kinds=[],
        started_at=now,
        heartbeat_at=now,
    )

    response = client.get(URL, headers={"Authorization": f"Bearer {TOKEN}"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    values = gauges(response.content)
    assert values["jobs_ready", (("queue", "mail"),)] == 2
    assert values["jobs_ready", (("queue", "default"),)] == 0, "the delayed job is not ready"
    assert values["jobs_queue_lag_seconds", (("queue", "mail"),)] == pytest.approx(90, abs=5)
    assert values["jobs_queue_lag_seconds", (("queue", "default"),)] == 0
    assert values["jobs_stuck", ()] == 1, "held by a runner nobody hears from"
    assert values["jobs_live_runners", ()] == 1


def test_a_paused_queue_s_waiting_jobs_are_its_lag_and_are_said_to_wait_for_the_pause(
    client, token
):
    assert enqueue(JobSpec.now("view.a", "old").with_queue("mail"))
    Job.objects.filter(key="old").update(run_at=timezone.now() - timedelta(minutes=10))
    Control.objects.create(
        scope="queue", name="mail", paused=True, changed_by="test", changed_at=timezone.now()
    )

    values = gauges(client.get(URL, headers={"Authorization": f"Bearer {TOKEN}"}).content)

    assert values["jobs_ready", (("queue", "mail"),)] == 1, "still ready, still counted"
    assert values["jobs_queue_lag_seconds", (("queue", "mail"),)] == pytest.approx(600, abs=5)
    assert values["jobs_waiting_jobs", (("queue", "mail"), ("reason", "pause"))] == 1
    assert values["jobs_waiting_jobs", (("queue", "mail"), ("reason", "ready"))] == 0


def test_a_token_shorter_than_the_minimum_is_refused_even_when_it_matches(client, settings):
    settings.JOBS_METRICS_TOKEN = "short"
    assert client.get(URL, headers={"Authorization": "Bearer short"}).status_code == 401


def test_anything_but_get_is_refused(client, token):
    response = client.post(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 405
