"""A workflow's admin page (issue 37): every step with its state and timing,
its graph as inline SVG, and Cancel behind a confirmation; reached from each
of its jobs' pages and filtering the job list.

Driven through the Django test client, as an operator's browser would be:
pages read as HTML, forms posted as their pages hold them.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs import JobSpec, Workflow
from jobs.admin import workflow_graph
from jobs.models import Dependency, Job, State
from tests.integration.admin.support import as_read, messages_of

pytestmark = pytest.mark.django_db

FLOW = "test.flow"


def diamond() -> tuple[uuid.UUID, dict[str, Job]]:
    """fetch, then small and large after it, then notify after both; fetch done
    and small running, so the page has four states to draw."""
    flow = Workflow("order 42")
    fetch = flow.add(JobSpec.now(FLOW, "fetch"), name="fetch")
    small = flow.add(JobSpec.now(FLOW, "small"), after=[fetch], name="resize small")
    large = flow.add(JobSpec.now(FLOW, "large"), after=[fetch], name="resize large")
    flow.add(JobSpec.now(FLOW, "notify"), after=[small, large], name="notify")
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    now = timezone.now()
    jobs = {job.key: job for job in Job.objects.filter(workflow_id=workflow_id)}
    Job.objects.filter(id=jobs["fetch"].id).update(
        state=State.DONE,
        attempts=1,
        started_at=now - timedelta(seconds=75),
        finished_at=now - timedelta(seconds=10),
        result={"rows": 12},
    )
    Dependency.objects.filter(depends_on_id=jobs["fetch"].id).update(outcome=State.DONE)
    Job.objects.filter(id__in=[jobs["small"].id, jobs["large"].id]).update(
        state=State.QUEUED, run_at=now
    )
    Job.objects.filter(id=jobs["small"].id).update(
        state=State.RUNNING,
        attempts=1,
        started_at=now - timedelta(seconds=5),
        claimed_by="host-1:4242",
        lease_expires_at=now + timedelta(minutes=5),
    )
    return workflow_id, {job.key: Job.objects.get(id=job.id) for job in jobs.values()}


def page_url(workflow_id: uuid.UUID) -> str:
    return reverse("admin:jobs_workflow", args=[workflow_id])


def cancel_url(workflow_id: uuid.UUID) -> str:
    return reverse("admin:jobs_workflow_cancel", args=[workflow_id])


def show(client: Client, workflow_id: uuid.UUID) -> str:
    response = client.get(page_url(workflow_id))
    assert response.status_code == 200, response.content.decode()[:2000]
    return as_read(response.content.decode())


def step_row(page: str, job: Job) -> str:
    found = re.search(rf'<tr class="jobs-step" data-step="{job.id}">(.*?)</tr>', page, re.S)
    assert found is not None, f"the table has a row for {job.key}"
    return found.group(1)


def test_anonymous_visitors_are_sent_to_log_in_and_staff_without_view_job_are_refused(
    client: Client,
):
    workflow_id, _ = diamond()
    response = client.get(page_url(workflow_id))
    assert response.status_code == 302, "an anonymous visitor is sent to log in"
    assert reverse("admin:login") in response["Location"]
    client.force_login(User.objects.create_user("nobody", password="pw", is_staff=True))
    assert client.get(page_url(workflow_id)).status_code == 403, "no view_job, no page"
    assert client.post(cancel_url(workflow_id), {"post": "yes"}).status_code == 403
    assert Job.objects.filter(workflow_id=workflow_id, state=State.CANCELLED).count() == 0


def test_the_page_shows_every_step_in_the_table_and_as_a_box_of_its_state_in_the_graph(
    viewer_client: Client,
):
    workflow_id, jobs = diamond()
    page = show(viewer_client, workflow_id)
    assert "order 42" in page
    assert str(workflow_id) in page
    start = page.index('<svg class="jobs-graph')
    svg = page[start : page.index("</svg>", start)]
    for job in jobs.values():
        step_row(page, job)
        box = re.search(
            rf'<a href="([^"]+)" class="jobs-node jobs-node-(\w+)" data-step="{job.id}"', svg
        )
        assert box is not None, f"the graph draws {job.key}"
        assert box.group(1) == reverse("admin:jobs_job_change", args=[job.id]), "it links its job"
        assert box.group(2) == job.state, "the box is coloured by the step's state"
    assert svg.count('class="jobs-edge"') == 4, "an arrow per dependency"
    notify = svg[svg.index(f'data-step="{jobs["notify"].id}"') :]
    assert notify.split("</title>")[0].endswith("notify\nwaiting for 2 of 2"), (
        "a waiting step's tooltip says what it waits for"
    )
    assert "<script" not in page.split('id="content-main"')[1], "the graph needs no script"
    assert not re.search(r'(src|href)="https?://', svg), "and no asset from elsewhere"


def test_each_step_row_says_its_state_attempts_timing_result_and_what_it_waits_for(
    viewer_client: Client,
):
    workflow_id, jobs = diamond()
    page = show(viewer_client, workflow_id)
    fetch = step_row(page, jobs["fetch"])
    assert "jobs-badge-done" in fetch
    assert "1 / " in fetch, "attempts spent of the budget"
    assert "1m 5s" in fetch, "how long it took"
    assert "{&quot;rows&quot;: 12}" in fetch, "its result's first line"
    notify = step_row(page, jobs["notify"])
    assert "waiting for 2 of 2" in notify, "a waiting step says what it waits for"
    assert "9999" not in notify, "not the parked date its row holds"
    assert "resize small" in notify
    assert "resize large" in notify
    small = step_row(page, jobs["small"])
    assert "jobs-badge-running" in small
    assert 'fetch <span class="jobs-quiet">(done)</span>' in small, "how its dependency ended"


def test_a_viewer_is_offered_no_cancel_and_cannot_post_one(viewer_client: Client):
    workflow_id, _ = diamond()
    assert cancel_url(workflow_id) not in show(viewer_client, workflow_id)
    assert viewer_client.post(cancel_url(workflow_id), {"post": "yes"}).status_code == 403
    assert not Job.objects.filter(workflow_id=workflow_id, state=State.CANCELLED).exists()


def test_cancel_asks_first_then_cancels_every_step_not_settled(admin_client: Client):
    """The page's Cancel answers with a confirmation that counts the steps it
    would cancel and says what a running one's cancel cannot do; only its Yes
    writes, and the message says what was done."""
    workflow_id, _ = diamond()
    assert cancel_url(workflow_id) in show(admin_client, workflow_id)
    response = admin_client.post(cancel_url(workflow_id))
    assert response.status_code == 200
    confirmation = response.content.decode()
    assert "Cancel 3 steps of workflow order 42" in confirmation
    assert "a running attempt is not interrupted, but its result is discarded" in confirmation
    assert "A hung synchronous handler ends only with its process" in confirmation, (
        "the running step's note is the one the job list's Cancel gives"
    )
    assert "1 step is already settled" in confirmation
    assert not Job.objects.filter(state=State.CANCELLED).exists(), "asking writes nothing"
    assert 'name="post" value="yes"' in confirmation

    done = admin_client.post(cancel_url(workflow_id), {"post": "yes"}, follow=True)
    assert done.redirect_chain[-1][0] == page_url(workflow_id), "back to the workflow's page"
    states = dict(Job.objects.filter(workflow_id=workflow_id).values_list("key", "state"))
    assert states == {
        "fetch": State.DONE,
        "small": State.CANCELLED,
        "large": State.CANCELLED,
        "notify": State.CANCELLED,
    }
    (message,) = messages_of(done)
    assert message.startswith("Workflow order 42: 3 steps cancelled (1 of them running")
    assert "Cancel this workflow" not in as_read(done.content.decode()), "nothing left to cancel"


def test_cancel_is_refused_without_the_csrf_token():
    workflow_id, _ = diamond()
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    assert client.post(cancel_url(workflow_id), {"post": "yes"}).status_code == 403
    assert not Job.objects.filter(state=State.CANCELLED).exists()


def test_a_job_page_links_its_workflow_and_the_workflow_page_links_its_jobs_in_the_list(
    viewer_client: Client,
):
    workflow_id, jobs = diamond()
    other = Workflow("another")
    other.add(JobSpec.now(FLOW, "elsewhere"))
    other.enqueue()
    job_page = viewer_client.get(reverse("admin:jobs_job_change", args=[jobs["notify"].id]))
    assert f'href="{page_url(workflow_id)}"' in job_page.content.decode(), "a step links its page"
    listed = viewer_client.get(
        reverse("admin:jobs_job_changelist"), {"workflow_id": str(workflow_id)}
    )
    assert listed.status_code == 200
    assert {job.id for job in listed.context["cl"].result_list} == {
        job.id for job in jobs.values()
    }, "the list narrowed to the workflow shows its steps and no other job"
    plain = Job.objects.create(kind=FLOW, key="plain", run_at=timezone.now(), max_attempts=1)
    in_any = viewer_client.get(reverse("admin:jobs_job_changelist"), {"workflow_id": "any"})
    shown = {job.id for job in in_any.context["cl"].result_list}
    assert len(shown) == 5, "'in a workflow' lists the steps of both workflows"
    assert plain.id not in shown, "and no plain job"
    assert f"?workflow_id={workflow_id}" in show(viewer_client, workflow_id)
    assert "order 42" in as_read(listed.content.decode()), "the filter names the workflow"
    assert f'<a href="{page_url(workflow_id)}">Workflow page</a>' in listed.content.decode(), (
        "the list narrowed to a workflow links its page"
    )


def test_an_unknown_workflow_is_not_found(viewer_client: Client):
    assert viewer_client.get(page_url(uuid.uuid4())).status_code == 404


def test_above_the_limit_the_graph_is_a_summary_by_layer(viewer_client: Client, settings):
    """More steps than are drawn one by one: a bar per layer, and the table still lists them."""
    flow = Workflow("wide")
    root = flow.add(JobSpec.now(FLOW, "root"))
    for index in range(workflow_graph.MAX_BOXES):
        flow.add(JobSpec.now(FLOW, f"leaf-{index}"), after=[root])
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    page = show(viewer_client, workflow_id)
    assert "jobs-graph-summary" in page
    assert 'class="jobs-node ' not in page, "no box per step"
    assert page.count('<g class="jobs-band">') == 2, "a bar per layer"
    assert page.count('<tr class="jobs-step"') == workflow_graph.MAX_BOXES + 1


def test_the_job_lists_cancel_counts_a_waiting_step_among_those_it_cancels(admin_client: Client):
    """`jobs.operations.cancel` retires a waiting step, so the list's
    confirmation lists it with those it would cancel, not as skipped."""
    _, jobs = diamond()
    fields = {"action": "cancel", "index": 0, "_selected_action": [str(jobs["notify"].id)]}
    page = admin_client.post(reverse("admin:jobs_job_changelist"), fields).content.decode()
    assert "Cancel 1 job" in page, "the waiting step is among those to cancel"
    assert "Skipped" not in page
    admin_client.post(reverse("admin:jobs_job_changelist"), {**fields, "post": "yes"})
    assert Job.objects.get(id=jobs["notify"].id).state == State.CANCELLED


def test_a_waiting_steps_job_page_says_what_it_waits_for_and_no_parked_date(
    viewer_client: Client,
):
    _, jobs = diamond()
    response = viewer_client.get(reverse("admin:jobs_job_change", args=[jobs["notify"].id]))
    page = as_read(response.content.decode())
    assert "9999" not in page, "the row's parked run_at is not shown"
    assert "not due while it waits" in page
    assert "its workflow&#x27;s dependencies (2 of 2 not settled: resize small, resize large)" in (
        page
    ), "its waiting-for names the dependencies not settled"
