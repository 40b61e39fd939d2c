"""One format for every instant the admin shows (`jobs.admin.display.stamp`):
to the second, with the zone, on the runners, controls and config pages as
on a job's; and a paused queue said in words, never a healthy-looking tick."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from jobs.admin.display import stamp
from jobs.models import Control, JobsConfig, RunnerProcess
from tests.integration.admin.support import as_read, make_runner, rows

pytestmark = pytest.mark.django_db

#: An afternoon, so that Django's own format would say "p.m.".
AT = datetime(2026, 12, 7, 13, 38, 54, tzinfo=UTC)

DJANGO_FORMAT = re.compile(r"\d [ap]\.m\.|\b(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\. ")


def page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.content.decode()[:2000]
    return as_read(response.content.decode())


def test_the_runners_controls_and_config_pages_show_times_to_the_second_with_the_zone(
    admin_client,
):
    runner = make_runner("host-a", ["k"])
    RunnerProcess.objects.filter(pk=runner.pk).update(started_at=AT)
    control = Control.objects.create(scope="queue", name="emails", paused=True, changed_at=AT)
    JobsConfig.load()
    JobsConfig.objects.update(updated_at=AT)
    pages = {
        "runners": reverse("admin:jobs_runnerprocess_changelist"),
        "runner": reverse("admin:jobs_runnerprocess_change", args=[runner.pk]),
        "controls": reverse("admin:jobs_control_changelist"),
        "control": reverse("admin:jobs_control_change", args=[control.pk]),
        "config": reverse("admin:jobs_jobsconfig_change", args=[JobsConfig.SINGLETON_ID]),
    }
    expected = "2026-12-07 13:38:54 UTC"
    assert stamp(AT) == expected
    for name, url in pages.items():
        shown = page(admin_client, url)
        assert expected in shown, f"the {name} page shows the time as the job pages do"
        assert not DJANGO_FORMAT.search(shown), f"the {name} page has no time in Django's format"


def test_the_attempt_history_stamps_to_the_millisecond():
    assert stamp(AT.replace(microsecond=250_400), ms=True) == "2026-12-07 13:38:54.250 UTC"
    assert stamp(AT.replace(microsecond=250_400)) == "2026-12-07 13:38:54 UTC"


def test_the_controls_page_says_paused_or_running_in_words_and_paused_is_the_alarm(
    admin_client,
):
    """Django's boolean icon drew a paused queue as a green tick."""
    Control.objects.create(scope="queue", name="emails", paused=True, changed_at=AT)
    Control.objects.create(
        scope="kind", name="orders.ship", paused=False, concurrency_limit=2, changed_at=AT
    )
    shown = page(admin_client, reverse("admin:jobs_control_changelist"))
    listed = {
        row.split('class="field-name">')[1].split("<")[0]: row
        for row in rows(shown)
        if 'class="field-name">' in row
    }
    assert '<span class="jobs-badge jobs-badge-gone">paused</span>' in listed["emails"]
    assert '<span class="jobs-badge jobs-badge-live">running</span>' in listed["orders.ship"]
    assert "icon-yes" not in shown, "no tick for a paused or running queue"
    assert "icon-no" not in shown, "nor a cross"


def test_a_kinds_limit_input_allows_what_a_runner_would_use(admin_client):
    shown = page(admin_client, reverse("admin:jobs_control_add"))
    field = re.search(r'<input[^>]*name="concurrency_limit"[^>]*>', shown)
    assert field is not None
    assert 'min="0"' in field.group(), "0 holds a kind's jobs: the least a limit can be"
    assert 'max="100000"' in field.group(), "the most `controls.problem` allows"
