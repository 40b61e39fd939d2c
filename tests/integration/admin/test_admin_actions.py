"""The admin's actions (run now, retry, cancel) go through `jobs.operations`, from the
list or a job's own page, and report what they skipped; a viewer cannot run them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, State
from jobs.store import for_database
from tests.factories import RECORDED, make_job
from tests.integration.admin.support import changelist, detail, reload
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db


def act(client: Client, action: str, *rows: Job) -> Any:
    """POST an action for `rows` to the changelist, as the action bar does, and follow."""
    return client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": action, "_selected_action": [str(row.id) for row in rows], "index": 0},
        follow=True,
    )


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_run_now_makes_queued_jobs_due_and_reports_what_it_skipped(admin_client):
    later = make_job("later", run_at=timezone.now() + timedelta(hours=1))
    done = make_job("done", state=State.DONE)
    before = timezone.now()
    response = act(admin_client, "run_now", later, done)
    assert before <= reload(later).run_at <= timezone.now(), "the queued job is due now"
    assert reload(done).state == State.DONE, "the settled job is untouched"
    assert messages_of(response) == [
        "Run now: 1 job made due now.",
        "Run now: skipped 1 job, nothing written for it: done, not queued (1).",
    ]


def test_retry_queues_a_failed_job_again_with_a_fresh_budget(admin_client):
    failed = make_job("k", state=State.FAILED, attempts=5, last_error="boom")
    response = act(admin_client, "retry", failed)
    row = reload(failed)
    assert (row.state, row.attempts, row.finished_at) == (State.QUEUED, 0, None)
    assert messages_of(response) == ["Retry: 1 job queued again with a fresh attempt budget."]


def test_retry_is_refused_while_a_live_job_holds_the_identity(admin_client):
    failed = make_job("k", state=State.FAILED, attempts=5, last_error="boom")
    make_job("k")  # a newer job for the same kind and key, still queued
    before = reload(failed)
    response = act(admin_client, "retry", failed)
    after = reload(failed)
    assert (after.state, after.attempts, after.updated_at) == (
        State.FAILED,
        5,
        before.updated_at,
    ), "nothing is written for the refused row"
    assert messages_of(response) == [
        f"Retry: skipped 1 job, nothing written for it: a live job already holds {RECORDED}:k (1)."
    ]


def test_cancel_retires_queued_jobs_and_abandons_each_once_naming_the_user(admin_client):
    queued = make_job("k")
    response = act(admin_client, "cancel", queued)
    row = reload(queued)
    assert (row.state, row.last_error) == (State.CANCELLED, "cancelled by ops")
    assert list(Abandonment.objects.values_list("key", "reason")) == [("k", "cancelled by ops")], (
        "abandon is called once, with a reason naming who cancelled"
    )
    assert messages_of(response) == ["Cancel: 1 job cancelled."]

    again = act(admin_client, "cancel", queued)
    assert Abandonment.objects.count() == 1, "cancelling again does not abandon again"
    assert messages_of(again) == [
        "Cancel: skipped 1 job, nothing written for it: cancelled, not queued or running (1)."
    ]


def test_cancel_of_a_running_job_makes_its_late_settle_lose(admin_client):
    make_job("k", run_at=timezone.now() - timedelta(seconds=1))
    store = for_database()
    [claim] = store.claim(timezone.now(), {RECORDED: timedelta(minutes=5)}, 1)
    act(admin_client, "cancel", claim.job)
    assert store.complete(claim.job, timezone.now()) is False, (
        "the attempt that was running no longer owns the row"
    )
    assert reload(claim.job).state == State.CANCELLED, "the cancellation stands"


def test_an_action_reports_a_job_that_no_longer_exists(admin_client):
    gone = make_job("k", run_at=timezone.now() + timedelta(hours=1))
    Job.objects.filter(id=gone.id).delete()
    response = act(admin_client, "run_now", gone)
    assert messages_of(response) == [
        "Run now: skipped 1 job, nothing written for it: no such job (1)."
    ], "a row deleted since the page was drawn (by the sweep, say) is reported, not ignored"


def test_actions_work_from_a_jobs_own_page_and_return_there(admin_client):
    queued = make_job("k")
    url = reverse("admin:jobs_job_change", args=[queued.id])
    assert 'value="cancel"' in detail(admin_client, queued), "the page offers the actions"
    response = admin_client.post(
        url, {"CHANGE_FORM-action": "cancel", "_selected_action": [str(queued.id)], "index": 0}
    )
    assert response.status_code == 302
    assert response["Location"] == url, "the operator is taken back to the job's page"
    assert reload(queued).state == State.CANCELLED


def test_a_viewer_can_look_but_cannot_run_an_action_or_edit(viewer_client):
    queued = make_job("k", run_at=timezone.now() + timedelta(hours=1))
    failed = make_job("f", state=State.FAILED, attempts=5)
    page = changelist(viewer_client)
    assert 'name="action"' not in page, "the viewer is offered no actions"
    for action, row in (("run_now", queued), ("retry", failed), ("cancel", queued)):
        act(viewer_client, action, row)
    assert reload(queued).state == State.QUEUED, "cancel did not touch the queued job"
    assert reload(queued).run_at > timezone.now(), "nor did run now"
    assert reload(failed).state == State.FAILED, "retry did not touch the failed job"
    assert Abandonment.objects.count() == 0
    url = reverse("admin:jobs_job_change", args=[queued.id])
    assert viewer_client.get(url).status_code == 200, "the viewer may read a job"
    cancel_here = {"CHANGE_FORM-action": "cancel", "_selected_action": [str(queued.id)]}
    assert viewer_client.post(url, cancel_here).status_code == 403, "nor act from its page"
    assert reload(queued).state == State.QUEUED
