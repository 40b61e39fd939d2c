"""Acceptance tests: real processes, real signals, real databases.

A test belongs here when it starts a real `runjobs` or `manage.py` process (or
another that sets Django up on the test database) or sends one a signal; what
runs in this process alone is tests/integration. `runjobs` processes come from
the `runjobs` fixture in tests/conftest.py.

These are about processes and time, so they wait for real; every wait is a
poll of the database (or of a process's log) with a deadline, never a bare
sleep, so a slow machine makes them slower rather than wrong, and a broken rule
fails them within seconds rather than hanging the run.
"""

from __future__ import annotations

from jobs.models import Job
from tests.conftest import RunJobs
from tests.helpers import wait_until
from tests.jobapp.models import Execution


def wait_for_log(process: RunJobs, text: str, timeout: float = 10.0) -> None:
    """Wait until `process` has logged `text`, or fail showing what it did log."""
    wait_until(
        lambda: text in process.output() or process.process.poll() is not None,
        timeout,
        f"the runner logs {text!r}",
    )
    assert text in process.output(), f"the runner logs {text!r} before exiting:\n{process.output()}"


def wait_for_attempt(job: Job, attempt: int, process: RunJobs, timeout: float = 15.0) -> None:
    """Wait until attempt `attempt` of `job` has started running its handler in `process`."""
    started = Execution.objects.filter(job_id=job.id, attempt=attempt)
    wait_until(
        lambda: started.exists() or process.process.poll() is not None,
        timeout,
        f"the runner starts attempt {attempt} of {job.key}",
    )
    assert started.exists(), (
        f"the runner starts attempt {attempt} of {job.key} before exiting:\n{process.output()}"
    )
