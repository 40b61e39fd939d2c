"""`jobs cancel` says, after its report, what cancelling a running job did not do:
stop its handler; a hung one ends with its runner's restart."""

from __future__ import annotations

import pytest

from jobs.models import Job, State
from tests.factories import make_job
from tests.integration.cli.test_cli import jobs

pytestmark = pytest.mark.django_db


def test_cancelling_a_running_job_reports_then_says_a_hung_handler_ends_with_its_process(
    configure,
):
    configure(hard_kill_after=45)
    running, queued = make_job("r-1", state=State.RUNNING), make_job("q-1")

    status, output = jobs("cancel", str(running.id), str(queued.id), "--by", "alice")

    report, note = output.splitlines()
    assert (status, report) == (0, "2 touched"), "the report comes first, as for any verb"
    assert note.startswith("1 of them was running. Cancelling does not stop a running handler")
    assert "45 s past its budget (hard_kill_after), its runner stops claiming" in note
    assert Job.objects.get(id=running.id).state == State.CANCELLED


def test_cancelling_queued_jobs_only_prints_the_report_alone():
    assert jobs("cancel", str(make_job("q-1").id)) == (0, "1 touched\n")


def test_cancel_by_filter_says_it_with_the_count_before_anything_is_confirmed(configure):
    configure(hard_kill_after=45)
    running = make_job("r-1", state=State.RUNNING)

    status, output = jobs("cancel", "--kind", running.kind, "--dry-run")

    count, note, dry = output.splitlines()
    assert count.startswith("Cancel 1 job matching"), "the count comes first"
    assert (status, dry) == (0, "Dry run: nothing changed."), output
    assert note.startswith("1 of them is running. Cancelling does not stop a running handler")
    assert "45 s past its budget (hard_kill_after)" in note
