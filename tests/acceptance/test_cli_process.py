"""`manage.py jobs` as a real process: only there does a bad argument show whether
the operator gets a sentence or a traceback, and which exit status a script sees."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import uuid

import pytest
from django.utils import timezone

from jobs import JobSpec, enqueue_many
from jobs.models import Job
from tests.conftest import ROOT, database_url

pytestmark = pytest.mark.django_db


def manage_jobs(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`manage.py jobs ARGS` as a real process on the test database, `stdin` its input."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "jobs", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["bogus"], 2, "invalid choice: 'bogus'"),
        (["show", "not-a-uuid"], 2, "'not-a-uuid' is not a job id"),
        (["enqueue", "k", "x", "--payload", "[1]"], 2, "--payload must be a JSON object"),
        (["enqueue", "k", "x", "--payload", "{nope"], 2, "--payload is not valid JSON"),
        (["enqueue", "k", "x", "--delay", "-1"], 2, "--delay: must be a number of seconds"),
        (["list", "--state", "stuck"], 2, "invalid choice: 'stuck'"),
        (["enqueue", "test.record", ""], 1, "Invalid job: key must be a non-empty string"),
        (["show", str(uuid.UUID(int=7))], 1, f"No job has the id {uuid.UUID(int=7)}"),
        (["enqueue", "k", "x", "--delay", "1e300"], 2, "from 0 to 315,360,000 (ten years)"),
        (["enqueue", "test.record", "x", "--delay", "1e13"], 2, "from 0 to 315,360,000"),
        (["enqueue", "test.record", "x", "--max-attempts", "1001"], 2, "from 1 to 1,000"),
        (["list", "--limit", "99999999999999999999"], 2, "--limit: must be a whole number"),
        (["show", "3f00a95"], 2, "'3f00a95' is too short to find a job by"),
        (["show", "3f00a956"], 1, "No job has the id starting 3f00a956."),
        (["list", "--database", "bogus"], 2, "no database 'bogus' in settings.DATABASES"),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_a_real_process_given_bad_input_prints_a_sentence_not_a_traceback_and_exits_non_zero(
    args, status, message
):
    result = manage_jobs(*args)

    assert "Traceback" not in result.stderr, f"the operator sees no traceback:\n{result.stderr}"
    assert message in result.stderr, f"stderr says what is wrong:\n{result.stderr}"
    assert result.returncode == status, (
        "bad arguments exit 2 and a refused job or unknown id exits 1, as the help says"
    )


#: Past the longest single argument Linux passes to a process (MAX_ARG_STRLEN,
#: 32 pages: 128 KiB), so only standard input can carry it.
OVER_ONE_ARGUMENT = 300 * 1024


@pytest.mark.django_db(transaction=True)
def test_a_real_process_reads_a_payload_no_argument_could_carry_from_standard_input():
    payload = {"order": 42, "note": "x" * OVER_ONE_ARGUMENT}
    with pytest.raises(OSError, match="Argument list too long") as refused:
        manage_jobs("enqueue", "test.record", "k0", "--payload", json.dumps(payload))
    assert refused.value.errno == errno.E2BIG, "no argument can carry it: exec refuses"

    result = manage_jobs(
        "enqueue", "test.record", "k1", "--payload-file", "-", stdin=json.dumps(payload)
    )

    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    job = Job.objects.get(kind="test.record", key="k1")
    assert job.payload == payload, "the payload is read whole from standard input"
    assert result.stdout == (
        f"queued test.record:k1 (id {job.id}, queue default, priority 0, "
        f"run_at {job.run_at.isoformat()})\n"
    )


@pytest.mark.django_db(transaction=True)
def test_a_real_process_given_a_payload_on_standard_input_that_is_not_an_object_writes_nothing():
    result = manage_jobs("enqueue", "test.record", "k1", "--payload-file", "-", stdin="[1, 2]")

    assert result.returncode == 2, "a refused argument exits 2"
    assert "argument --payload-file: standard input must be a JSON object" in result.stderr
    assert "Traceback" not in result.stderr
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_process_exits_1_when_a_job_was_skipped_and_0_when_all_were_done():
    queued = manage_jobs("enqueue", "test.record", "k1")
    assert (queued.returncode, queued.stderr) == (0, ""), queued.stderr
    job = Job.objects.get(kind="test.record", key="k1")

    duplicate = manage_jobs("enqueue", "test.record", "k1")
    assert duplicate.returncode == 1, "a refused duplicate exits 1"
    assert duplicate.stdout.startswith("already queued (a live job holds test.record:k1")

    skipped = manage_jobs("retry", str(job.id))
    assert skipped.returncode == 1, "retrying a queued job skips it, and the status says so"
    assert skipped.stdout == "0 touched; skipped 1 (queued, not failed or cancelled)\n"

    cancelled = manage_jobs("cancel", str(job.id))
    assert (cancelled.returncode, cancelled.stdout) == (0, "1 touched\n")
    job.refresh_from_db()
    assert job.state == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_a_real_process_given_an_ambiguous_id_prefix_lists_the_jobs_it_begins_and_exits_2():
    for n in range(2):
        ident = uuid.UUID(f"3f00a956-0000-4000-8000-{n:012x}")
        Job.objects.create(
            id=ident, kind="test.record", key=f"k{n}", max_attempts=5, run_at=timezone.now()
        )

    result = manage_jobs("cancel", "3f00a956")

    assert result.returncode == 2, result.stderr
    assert "The id prefix 3f00a956 begins 2 jobs' ids; give more of its digits:" in result.stderr
    assert "3f00a956-0000-4000-8000-000000000001  queued  test.record  k1" in result.stderr
    assert Job.objects.filter(state="queued").count() == 2, "nothing was cancelled"


def test_a_real_process_whose_database_does_not_answer_says_so_in_a_sentence_and_exits_1(
    tmp_path,
):
    """During an outage the operator must read what is wrong, not Django's checks' traceback."""
    missing = tmp_path / "no-such-directory" / "jobs.sqlite3"
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "jobs", "stats"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": f"sqlite:///{missing}",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "Traceback" not in result.stderr, f"no traceback:\n{result.stderr}"
    assert "the database did not answer: unable to open database file" in result.stderr
    assert result.returncode == 1


@pytest.mark.django_db(transaction=True)
def test_a_listing_piped_into_a_reader_that_stops_early_ends_without_a_traceback():
    """`jobs list | head` is how operators read a long queue."""
    enqueue_many([JobSpec.now("test.record", f"k{n}") for n in range(3_000)])
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "jobs", "list", "--limit", "3000"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": database_url(),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    assert process.stdout.readline().startswith("ID"), "the header came first"
    process.stdout.close()  # the reader goes away, as `head -1` does
    stderr = process.stderr.read()
    process.wait(60)

    assert "Traceback" not in stderr, stderr
    assert "BrokenPipeError" not in stderr, stderr
