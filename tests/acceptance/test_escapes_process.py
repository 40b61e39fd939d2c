"""What escapes a handler, in a real `runjobs`: a `sys.exit()` ends that attempt only."""

from __future__ import annotations

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_handler_calling_sys_exit_is_retried_and_the_runner_takes_the_next_job(
    runjobs, configure
):
    """`sys.exit(1)` on a worker thread had ended the thread silently and left the
    row `running` until its lease expired. It is the attempt's failure: the row is
    queued for retry with the traceback, and the runner, its one slot given
    back, runs the next job in the same process."""
    configure(max_concurrent=1, retry_base_seconds=3600, retry_max_seconds=3600, max_attempts=5)
    assert enqueue(JobSpec.now("test.exit", "exits"))
    process = runjobs()

    def retried() -> bool:
        job = Job.objects.get(kind="test.exit")
        return job.state == State.QUEUED and job.attempts == 1

    wait_until(retried, 30, "the exiting attempt was settled as a retry")
    job = Job.objects.get(kind="test.exit")
    assert "Traceback" in job.last_error, "last_error holds the traceback"
    assert "SystemExit" in job.last_error, "last_error names what was raised"

    assert enqueue(JobSpec.now("test.record", "next"))
    wait_until(
        lambda: Job.objects.get(kind="test.record").state == State.DONE,
        30,
        "the job queued after it ran",
    )
    assert process.process.poll() is None, "the runner is still running: " + process.output()
    pids = set(Execution.objects.values_list("pid", flat=True))
    assert pids == {process.pid}, "both jobs ran in the one runner process"
