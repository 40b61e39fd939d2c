"""`manage.py jobs workflow` as a real process: whether stdin is a terminal, and
the exit status a script sees, are only real there."""

from __future__ import annotations

import uuid

import pytest

from jobs import JobSpec, Workflow
from jobs.models import Job, State
from tests.acceptance.test_cli_process import manage_jobs

pytestmark = pytest.mark.django_db(transaction=True)


def two_steps() -> uuid.UUID:
    flow = Workflow("two")
    first = flow.add(JobSpec.now("test.record", "first"))
    flow.add(JobSpec.now("test.record", "second"), after=[first])
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    return workflow_id


def test_a_script_cancelling_a_workflow_without_yes_is_refused_and_nothing_is_cancelled():
    workflow_id = two_steps()

    result = manage_jobs("workflow", "cancel", str(workflow_id), stdin="y\n")

    assert result.returncode == 1, result.stderr
    assert "stdin is not a terminal to confirm at: add --yes" in result.stderr
    assert "Traceback" not in result.stderr
    assert set(Job.objects.values_list("state", flat=True)) == {State.QUEUED, State.WAITING}


def test_a_script_cancelling_a_workflow_with_yes_cancels_it_and_exits_0():
    workflow_id = two_steps()

    result = manage_jobs("workflow", "cancel", str(workflow_id)[:8], "--yes", "--by", "cron")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "Cancelled: 2 steps cancelled."
    assert set(Job.objects.values_list("state", flat=True)) == {State.CANCELLED}


def test_a_real_process_given_an_id_no_workflow_has_says_so_and_exits_2_writing_nothing():
    result = manage_jobs("workflow", "show", str(uuid.UUID(int=7)))
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"No workflow, nor any step of one, has the id {uuid.UUID(int=7)}." in result.stderr
