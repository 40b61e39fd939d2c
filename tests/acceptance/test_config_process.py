"""The live config across processes: a changed row reaches an enqueue in another
process, and SIGHUP makes a `runjobs` process read it at once."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from jobs.models import Job, Schedule, State
from tests.conftest import ROOT, database_url
from tests.factories import add_ready_job, set_row
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_max_attempts_change_reaches_an_enqueue_in_another_process(configure):
    configure(max_attempts=5)
    set_row(max_attempts=7)
    script = (
        "import django; django.setup(); from jobs import JobSpec, enqueue; "
        "assert enqueue(JobSpec.now('test.record', 'elsewhere'))"
    )
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": database_url(), "PATH": ""}
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True, timeout=60)
    assert Job.objects.get(key="elsewhere").max_attempts == 7


def test_sighup_applies_a_change_at_once(runjobs, configure):
    """SIGHUP must not wait for the runner's own (here, hour-long) config check."""
    configure(poll_interval_ms=3_600_000)
    process = runjobs(env={"JOBS_CONFIG_CHECK_SECONDS": "3600"})
    assert wait_until(lambda: "runner_started" in process.output(), 20), process.output()
    # Its start-up plans the sweep's schedule; then it idles.
    assert wait_until(lambda: Schedule.objects.filter(name="jobs.sweep").exists(), 5)
    job = add_ready_job("test.record", "after-hup")
    set_row(poll_interval_ms=50)
    process.process.send_signal(signal.SIGHUP)
    assert wait_until(lambda: Job.objects.get(pk=job.pk).state == State.DONE, 5), process.output()
    assert "runner_reload" in process.output()
    process.process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, process.output()
