"""What real processes write in their log: a retired job's telling line, a key's
control characters as escapes, and an operator's change in a project that set
no LOGGING.

Only a real process shows what reaches the terminal: its formatter, its
handler (the project's, or the one `jobs.log.to_terminal_unless_configured`
adds), and the bytes written.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Control, Job, State
from tests.conftest import ROOT, database_url
from tests.helpers import wait_until
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db(transaction=True)

#: What the runner says of a job whose `run` raised on each of its three attempts.
TOLD = "gave up after 3 of 3 attempts: RuntimeError: boom on attempt 3"


def lines_of(output: str, event: str) -> list[str]:
    return [line for line in output.splitlines() if f" jobs {event} " in line]


def test_a_job_raising_until_its_attempts_run_out_is_logged_and_abandoned_with_its_exceptions_line(
    runjobs, configure
):
    """Its log lines, its row and the reason its `abandon` stores (what an API
    hands its clients) name what was raised, never a traceback's first line
    or a server path."""
    configure(poll_interval_ms=50, retry_base_seconds=0, retry_max_seconds=0)
    spec = JobSpec.now("test.refuse", "raises").with_payload({"raise": True})
    assert enqueue(spec.with_max_attempts(3))
    process = runjobs()

    wait_until(lambda: Abandonment.objects.exists(), 30, "the job was abandoned")
    job = Job.objects.get(kind="test.refuse")
    assert (job.state, job.attempts, job.last_error) == (State.FAILED, 3, TOLD)
    assert list(Abandonment.objects.values_list("reason", flat=True)) == [TOLD], (
        "abandon was told the exception's line"
    )
    wait_until(lambda: lines_of(process.output(), "job_abandoned"), 10, "abandon is logged")
    output = process.output()
    [failed] = lines_of(output, "job_failed")
    [abandoned] = lines_of(output, "job_abandoned")
    assert f'error="{TOLD}"' in failed, failed
    assert f'reason="{TOLD}"' in abandoned, abandoned
    retries = lines_of(output, "job_retry")
    assert len(retries) == 2, output
    assert all('error="RuntimeError: boom on attempt' in line for line in retries), retries
    assert "Traceback" not in output, f"no traceback reaches the runner's log:\n{output}"
    assert "Traceback (most recent call last):" in job.attempt_history[-1].traceback, (
        "the attempt record keeps it"
    )


def test_a_key_holding_a_tab_and_an_escape_reaches_the_runners_log_as_escapes(runjobs):
    """A key is the caller's text: printed raw, its ESC would drive the
    operator's terminal and its TAB forge a column."""
    key = "k\tforged=1\x1b[2J\x1b]0;owned\x07"
    assert enqueue(JobSpec.now("test.refuse", key))
    process = runjobs("--burst")

    assert process.wait() == 0, process.output()
    written = process.log.read_bytes()
    for raw in (b"\x1b", b"\t", b"\x07"):
        assert raw not in written, f"{raw!r} never reaches the log: {written[-800:]!r}"
    [failed] = lines_of(written.decode(), "job_failed")
    assert ' key="k\\tforged=1\\x1b[2J\\x1b]0;owned\\x07" ' in failed, failed


def jobs_without_logging(*args: str) -> subprocess.CompletedProcess[str]:
    """`manage.py jobs ARGS` in a project with no LOGGING setting."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings_without_logging",
        "DATABASE_URL": database_url(),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "jobs", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_pause_made_in_a_project_without_logging_is_logged_naming_who():
    """`runjobs` printed its lines there; `manage.py jobs` dropped them, so a
    pause left no trace but the row."""
    paused = jobs_without_logging("pause", "--kind", "test.record", "--by", "alice")

    assert paused.returncode == 0, paused.stderr
    assert Control.objects.filter(name="test.record", paused=True).exists()
    [line] = [line for line in paused.stderr.splitlines() if "jobs_control_changed" in line]
    assert line.endswith(" INFO jobs jobs_control_changed kind=test.record by=alice paused=True"), (
        f"the change is logged with who made it, on stderr: {line!r}"
    )
    assert "jobs_control_changed" not in paused.stdout, "stdout stays the command's own answer"
