"""Cancel asks first: a page lists what it would touch and what it would skip, and
only that page's "Yes" writes, from the job list's selected rows and from a
job's own page alike (every row the filters match is counted and confirmed by
number instead: tests/integration/admin/test_admin_bulk.py).

Each confirmation is posted back exactly as its page's form holds it: the
form's URL and hidden fields, read from the HTML.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs.models import Job, State
from tests.factories import RECORDED, make_job
from tests.integration.admin.support import messages_of
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:jobs_job_changelist"


def form_of(page: str) -> tuple[str, dict[str, list[str]]]:
    """The confirmation form's URL and the fields its "Yes" posts."""
    form = re.search(r'<form method="post" action="([^"]*)">(.*?)</form>', page, re.S)
    assert form is not None, "the page has a form to confirm with"
    fields: dict[str, list[str]] = {}
    for name, value in re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.group(2)
    ):
        if name != "csrfmiddlewaretoken":
            fields.setdefault(name, []).append(html.unescape(value))
    assert re.search(r'<input type="submit" value="Yes, cancel">', form.group(2)), "a Yes button"
    return html.unescape(form.group(1)), fields


def section(page: str, part: str) -> str:
    """The page's list of jobs it would touch ("touch") or skip ("skip")."""
    found = re.search(rf'class="module jobs-confirm-{part}">(.*?)</table>', page, re.S)
    assert found is not None, f"the page has a {part} list"
    return found.group(1)


def states(*jobs: Job) -> list[str]:
    return [Job.objects.get(id=job.id).state for job in jobs]


def ask(client: Client, url: str, **data: Any) -> str:
    response = client.post(url, data)
    assert response.status_code == 200, "the first POST answers with a page, not a redirect"
    assert response.templates[0].name == "admin/jobs/job/retire_confirmation.html"
    return response.content.decode()


def test_cancel_from_the_list_asks_first_listing_the_jobs_it_would_touch_and_skip(admin_client):
    queued = make_job("q-1")
    running = make_job("r-1", state=State.RUNNING)
    done = make_job("d-1", state=State.DONE)
    url = reverse(CHANGELIST)
    page = ask(
        admin_client,
        url,
        action="cancel",
        index=0,
        _selected_action=[str(j.id) for j in (queued, running, done)],
    )
    assert states(queued, running, done) == ["queued", "running", "done"], "nothing written"
    assert Abandonment.objects.count() == 0, "no abandon ran"
    touch, skip = section(page, "touch"), section(page, "skip")
    for job in (queued, running):
        assert f"<td>{RECORDED}</td>" in touch
        assert f">{job.key}</td>" in touch, f"{job.key} is listed as to be cancelled"
        assert f"jobs-badge-{job.state}" in touch
        assert f"<code>{job.id.hex[:8]}</code>" in touch, "with its id's first 8 hex digits"
    assert ">d-1</td>" in skip, "the settled job is listed as skipped"
    assert ">d-1</td>" not in touch
    assert "Cancel 2 jobs" in page
    assert "Skipped: 1 job" in page
    assert f'<a href="{url}">Jobs</a>' in page, "the admin's breadcrumbs lead back to the list"
    assert f'<a href="{url}" class="button cancel-link">No, take me back</a>' in page


def test_only_the_confirmed_post_cancels(admin_client, django_capture_on_commit_callbacks):
    queued = make_job("q-1")
    done = make_job("d-1", state=State.DONE)
    page = ask(
        admin_client,
        reverse(CHANGELIST),
        action="cancel",
        index=0,
        _selected_action=[str(queued.id), str(done.id)],
    )
    url, fields = form_of(page)
    assert fields["post"] == ["yes"]
    with django_capture_on_commit_callbacks(execute=True):  # abandon runs once it commits
        response = admin_client.post(url, fields, follow=True)
    assert states(queued, done) == ["cancelled", "done"], "the confirmed POST cancelled"
    assert list(Abandonment.objects.values_list("key", flat=True)) == ["q-1"]
    assert messages_of(response) == [
        "Cancel: 1 job cancelled.",
        "Cancel: skipped 1 job, nothing written for it: done, not waiting, queued or running (1).",
    ]


def test_cancel_from_a_jobs_own_page_asks_first_then_returns_there_once_confirmed(admin_client):
    queued = make_job("q-1")
    url = reverse("admin:jobs_job_change", args=[queued.id])
    page = ask(
        admin_client, url, **{"CHANGE_FORM-action": "cancel", "_selected_action": str(queued.id)}
    )
    assert states(queued) == ["queued"], "nothing written by the first POST"
    assert ">q-1</td>" in section(page, "touch")
    assert f'<a href="{url}">{html.escape(str(queued))}</a>' in page, "breadcrumbs name the job"
    assert f'<a href="{url}" class="button cancel-link">No, take me back</a>' in page
    form_url, fields = form_of(page)
    assert (form_url, fields["CHANGE_FORM-action"]) == (url, ["cancel"])
    response = admin_client.post(form_url, fields)
    assert response.status_code == 302
    assert response["Location"] == url, "the operator is taken back to the job's page"
    assert states(queued) == ["cancelled"]


def test_a_cancel_that_would_touch_nothing_offers_no_yes(admin_client):
    done = make_job("d-1", state=State.DONE)
    page = ask(
        admin_client, reverse(CHANGELIST), action="cancel", index=0, _selected_action=[done.id]
    )
    assert "Nothing to cancel" in page
    assert 'value="Yes, cancel"' not in page, "nothing to confirm"
    assert ">d-1</td>" in section(page, "skip")


def test_the_confirmation_shows_a_key_holding_markup_as_text(admin_client):
    job = make_job("<script>alert(1)</script>")
    page = ask(
        admin_client, reverse(CHANGELIST), action="cancel", index=0, _selected_action=[job.id]
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(page, "touch")
    assert "<script>alert" not in page
