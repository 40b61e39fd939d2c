"""Cancelling a hung running job, with a real runner: the cancel retires the row
but cannot stop the handler's thread; the runner's process, not the cancel,
ends it, `hard_kill_after` past the attempt's budget, as the cancel's
confirmation says (`jobs.presentation.cancelling_running`)."""

from __future__ import annotations

import time

import pytest

from jobs import JobSpec, enqueue, operations
from jobs.models import Job
from jobs.runner.process import EXIT_HARD_LIMIT
from tests.acceptance import wait_for_attempt

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_cancelled_hung_job_still_costs_its_runner_process_hard_kill_after_past_its_budget(
    runjobs, configure
):
    configure(hard_kill_after=1, retry_base_seconds=60, poll_interval_ms=100)
    spec = JobSpec.now("test.sleep", "hung").with_payload({"seconds": 3600, "sleep_on": [1]})
    assert enqueue(spec)
    hung = Job.objects.get(key="hung")
    process = runjobs("--grace", "2", env={"TEST_SLEEP_LEASE": "1"})
    wait_for_attempt(hung, 1, process)
    started = time.monotonic()

    report = operations.cancel([hung.id], by="ops")
    status = process.wait(timeout=30)
    took = time.monotonic() - started

    assert report.touched == 1, "the running job was cancelled"
    assert status == EXIT_HARD_LIMIT, f"the process exits to be restarted:\n{process.output()}"
    assert took < 1 + 1 + 2 + 3, "at its budget + hard_kill_after, within the grace"
    assert process.output().count("runner_hard_limit") == 1, "one line says why"
    hung.refresh_from_db()
    assert (hung.state, hung.last_error) == ("cancelled", "cancelled by ops"), (
        "the cancel stands: the timed-out attempt's settle was fenced out"
    )
