"""Cancel's confirmation says what cancelling a running job does not do: stop its
handler. An operator cancelling a hung job must know that its runner's restart,
`hard_kill_after` past the attempt's budget, is what ends it, not the cancel."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from jobs.models import Job, State
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def confirmation(admin_client: Client, *jobs: Job) -> str:
    response = admin_client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": "cancel", "index": 0, "_selected_action": [str(job.id) for job in jobs]},
    )
    assert response.status_code == 200, "the first POST answers with the confirmation"
    return response.content.decode()


def test_cancelling_a_running_job_is_confirmed_saying_a_hung_handler_ends_with_its_process(
    admin_client, configure
):
    configure(hard_kill_after=45)
    page = confirmation(admin_client, make_job("r-1", state=State.RUNNING), make_job("q-1"))

    assert "1 of them is running." in page, "the page counts the running jobs"
    assert "Cancelling does not stop a running handler" in page
    assert (
        "A hung synchronous handler ends only with its process: 45 s past its budget "
        "(hard_kill_after), its runner stops claiming, lets its other jobs finish within "
        "--grace (handing back the rest) and exits, to be restarted by runjobs --processes "
        "or your process manager."
    ) in page, "and says when and how a hung one ends, with the setting as it is now"


def test_with_hard_kill_after_off_the_confirmation_says_the_runner_never_restarts_itself(
    admin_client, configure
):
    configure(hard_kill_after=0)
    page = confirmation(admin_client, make_job("r-1", state=State.RUNNING))

    assert "hard_kill_after is 0: its runner never restarts itself" in page


def test_cancelling_only_queued_jobs_says_nothing_of_handlers(admin_client):
    page = confirmation(admin_client, make_job("q-1"), make_job("q-2"))

    assert "Cancel 2 jobs" in page
    assert "running handler" not in page, "no note where no handler runs"


def test_cancelling_every_job_the_filters_match_says_it_too_when_some_are_running(
    admin_client: Client, configure
):
    configure(hard_kill_after=45)
    jobs = [make_job("r-1", state=State.RUNNING), make_job("r-2", state=State.RUNNING)]
    response = admin_client.post(
        reverse("admin:jobs_job_changelist"),
        {
            "action": "cancel",
            "index": 0,
            "select_across": 1,
            "_selected_action": [str(job.id) for job in jobs],
        },
    )
    page = response.content.decode()

    assert response.templates[0].name == "admin/jobs/job/bulk_confirmation.html"
    assert "2 of them are running. Cancelling does not stop a running handler" in page
    assert "45 s past its budget (hard_kill_after)" in page
