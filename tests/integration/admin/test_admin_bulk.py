"""The job list's actions on every job its filters match ("select all"), and the
dead letters page: counted, asked with the number, done in batches; the change
permission and the cap as for the list's actions.

Each confirmation is posted back exactly as its page's form holds it: the
form's URL and hidden fields, read from the HTML.
"""

from __future__ import annotations

import html
import re
from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from jobs import bulk
from jobs.models import Job, State
from tests import factories
from tests.integration.admin.support import messages_of
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db

KIND = "kind.a"

make_job = partial(factories.make_job, kind=factories.RECORDED)


def failed(key: str, kind: str = KIND, error: str = "gave up after 5 of 5 attempts: E: 503"):
    return make_job(key, State.FAILED, kind=kind, attempts=5, last_error=error)


def states(*jobs: Job) -> list[str]:
    return [Job.objects.get(id=job.id).state for job in jobs]


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
    return html.unescape(form.group(1)), fields


def across(client: Client, action: str, query: str = f"?kind={KIND}", **data: Any):
    """An action posted from the list with "Select all N jobs" chosen."""
    url = reverse("admin:jobs_job_changelist") + query
    some = Job.objects.first()
    return url, client.post(
        url,
        {
            "action": action,
            "index": 0,
            "select_across": 1,
            "_selected_action": [str(some.id)] if some else [],
            **data,
        },
    )


def test_retry_of_every_matching_job_asks_with_their_number_then_retries_them_all(admin_client):
    rows = [failed(f"f{n}") for n in range(3)]
    queued = make_job("q", kind=KIND)
    other = failed("o", kind="kind.b")
    url, response = across(admin_client, "retry")
    assert response.status_code == 200
    assert response.templates[0].name == "admin/jobs/job/bulk_confirmation.html"
    page = response.content.decode()
    assert "Retry 3 jobs matching kind kind.a?" in page
    assert "1: queued, not failed or cancelled" in page, "what it would skip, and why"
    assert states(*rows) == ["failed"] * 3, "the first POST writes nothing"
    form_url, fields = form_of(page)
    assert form_url == url
    assert fields["post"] == ["yes"]
    assert fields["select_across"] == ["1"]
    response = admin_client.post(form_url, fields, follow=True)
    assert states(*rows, queued, other) == ["queued"] * 3 + ["queued", "failed"]
    assert messages_of(response) == [
        "Retry (kind kind.a): 3 queued again with a fresh attempt budget; skipped 1 "
        "(queued, not failed or cancelled)."
    ]


def test_cancel_of_every_matching_job_is_counted_confirmed_and_each_abandon_runs_once(
    admin_client, django_capture_on_commit_callbacks
):
    rows = [make_job(f"q{n}") for n in range(3)]  # of the recording handler's kind
    other = make_job("b-1", kind="kind.b")
    _, response = across(admin_client, "cancel", query=f"?kind={factories.RECORDED}")
    page = response.content.decode()
    assert f"Cancel 3 jobs matching kind {factories.RECORDED}?" in page
    assert ">b-1<" not in page
    form_url, fields = form_of(page)
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(form_url, fields, follow=True)
    assert states(*rows) == ["cancelled"] * 3
    assert states(other) == ["queued"], "the job outside the filter is untouched"
    assert Abandonment.objects.count() == 3
    assert {Job.objects.get(id=r.id).last_error for r in rows} == {"cancelled by ops"}


def test_run_now_of_every_matching_job_asks_first_too(admin_client):
    row = make_job("q", kind=KIND)
    _, response = across(admin_client, "run_now")
    assert "Run now 1 job matching kind kind.a?" in response.content.decode()
    form_url, fields = form_of(response.content.decode())
    response = admin_client.post(form_url, fields, follow=True)
    assert messages_of(response) == ["Run now (kind kind.a): 1 made due now."]
    assert states(row) == ["queued"]


def test_a_job_that_changed_after_the_confirmation_was_drawn_is_left_and_said(admin_client):
    rows = [failed(f"f{n}") for n in range(2)]
    _, response = across(admin_client, "retry")
    form_url, fields = form_of(response.content.decode())
    Job.objects.filter(id=rows[0].id).update(state=State.QUEUED)  # someone else retried it
    response = admin_client.post(form_url, fields, follow=True)
    assert messages_of(response) == [
        "Retry (kind kind.a): 1 queued again with a fresh attempt budget; 1 left, changed "
        "since counted."
    ]


def test_more_matching_jobs_than_the_cap_are_refused_with_a_message_writing_nothing(
    admin_client, monkeypatch
):
    monkeypatch.setattr(bulk, "CAP", 2)
    rows = [failed(f"f{n}") for n in range(3)]
    _, response = across(admin_client, "retry")
    assert response.status_code == 302
    response = admin_client.get(response["Location"])
    [said] = messages_of(response)
    assert said.startswith("3 jobs match (kind kind.a), more than the 2 one action may touch")
    assert said.endswith("nothing was done (manage.py jobs retry takes --max).")
    assert states(*rows) == ["failed"] * 3


def test_a_viewer_cannot_act_on_every_matching_job(admin_client):
    rows = [failed(f"f{n}") for n in range(2)]
    _, page = across(admin_client, "retry")  # a confirmation drawn for someone allowed
    form_url, fields = form_of(page.content.decode())
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename="view_job"))
    viewer_client = Client()
    viewer_client.force_login(viewer)
    response = viewer_client.post(form_url, fields, follow=True)
    assert states(*rows) == ["failed"] * 2, "the change permission is needed, as for Retry"
    assert messages_of(response) == [], "and nothing is said to have been done"


def test_selected_rows_without_select_all_keep_the_actions_as_they_were(admin_client):
    row = failed("f")
    response = admin_client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": "retry", "index": 0, "_selected_action": [str(row.id)]},
        follow=True,
    )
    assert messages_of(response) == ["Retry: 1 job queued again with a fresh attempt budget."]


# -- dead letters ----------------------------------------------------------------


def test_the_dead_letters_page_groups_retired_jobs_and_is_linked_from_the_list_and_app(
    admin_client,
):
    for n in range(3):
        failed(f"f{n}")
    make_job("c", State.CANCELLED, kind=KIND, last_error="cancelled by alice")
    url = reverse("admin:jobs_dead_letters")
    page = admin_client.get(url).content.decode()
    rows = re.findall(r'<td class="jobs-dead-count jobs-dead-jobs">([\d,]+)</td>', page)
    assert rows == ["3", "1"], "most jobs first"
    assert '<td class="jobs-dead-line">E: 503</td>' in page
    assert '<td class="jobs-dead-line">cancelled by alice</td>' in page
    listing = admin_client.get(reverse("admin:jobs_job_changelist")).content.decode()
    assert f'href="{url}"' in listing
    app = admin_client.get(reverse("admin:app_list", args=["jobs"])).content.decode()
    assert f'href="{url}"' in app


def test_retry_all_in_a_group_asks_with_the_count_then_redrives_with_the_new_budget(
    admin_client,
):
    group = [failed(f"f{n}") for n in range(2)]
    other = failed("o", error="gave up after 5 of 5 attempts: E: 404")
    url = reverse("admin:jobs_dead_letters")
    response = admin_client.post(url, {"kind": KIND, "line": "E: 503", "attempts": "7"})
    page = response.content.decode()
    assert "Retry 2 jobs matching kind kind.a, error &#x27;E: 503&#x27;?" in page
    assert "queued again with 7 attempts from now (its max_attempts becomes 7)" in page
    assert states(*group) == ["failed"] * 2
    form_url, fields = form_of(page)
    response = admin_client.post(form_url, fields, follow=True)
    assert states(*group, other) == ["queued", "queued", "failed"]
    assert {Job.objects.get(id=j.id).max_attempts for j in group} == {7}
    assert response.redirect_chain[-1][0] == url, "back to the dead letters"


@pytest.mark.parametrize("attempts", ["0", "1001", "many", "-1"])
def test_a_redrive_with_a_bad_budget_is_refused_writing_nothing(admin_client, attempts):
    row = failed("f")
    url = reverse("admin:jobs_dead_letters")
    response = admin_client.post(
        url, {"kind": KIND, "line": "E: 503", "attempts": attempts}, follow=True
    )
    [said] = messages_of(response)
    assert said.startswith("Attempts must be a whole number from 1 to 1,000")
    assert states(row) == ["failed"]


def test_a_viewer_sees_the_dead_letters_but_cannot_redrive(viewer_client):
    row = failed("f")
    url = reverse("admin:jobs_dead_letters")
    page = viewer_client.get(url)
    assert page.status_code == 200
    assert "Retry all" not in page.content.decode()
    response = viewer_client.post(url, {"kind": KIND, "line": "E: 503", "post": "yes"})
    assert response.status_code == 403
    assert states(row) == ["failed"]
