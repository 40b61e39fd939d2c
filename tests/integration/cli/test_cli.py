"""`manage.py jobs`: the operator's verbs at a shell.

These tests call the command in-process (`call_command`) and read what it
printed. As a real process (a sentence or a traceback, the exit status a script
sees) it is tests/acceptance/test_cli_process.py; how it words durations,
tests/unit/test_cli_format.py.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from datetime import timedelta
from functools import partial

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from freezegun import freeze_time

from jobs.models import Job, RunnerProcess
from jobs.stats import collect
from tests import factories
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db


def jobs(*args: str) -> tuple[int, str]:
    """Run `manage.py jobs ARGS` in-process: its exit status and what it printed."""
    out = io.StringIO()
    try:
        call_command("jobs", *args, stdout=out)
    except SystemExit as stop:
        return int(stop.code or 0), out.getvalue()
    return 0, out.getvalue()


make_job = partial(factories.make_job, leased=False)


def line_of(output: str, job: Job) -> str:
    lines = [line for line in output.splitlines() if line.startswith(str(job.id))]
    assert len(lines) == 1, f"the job {job.key} has exactly one line in:\n{output}"
    return lines[0]


# --- list -----------------------------------------------------------------------


@freeze_time("2026-03-01 12:00:00")
def test_list_shows_one_line_per_job_newest_first_with_attempts_when_and_the_first_error_line():
    now = timezone.now()
    old = make_job(
        "k-old",
        state="failed",
        attempts=5,
        last_error="boom: the mail server said no\nTraceback (most recent call last): ...",
        finished_at=now - timedelta(hours=2),
        created_at=now - timedelta(hours=3),
    )
    new = make_job(
        "k-new",
        kind="test.sleep",
        run_at=now + timedelta(minutes=5),
        created_at=now - timedelta(minutes=1),
    )
    running = make_job(
        "k-run",
        state="running",
        attempts=2,
        lease_expires_at=now - timedelta(seconds=30),
        created_at=now - timedelta(hours=1),
    )

    status, output = jobs("list")

    assert status == 0
    ids = [line.split()[0] for line in output.splitlines()[1:]]
    assert ids == [str(new.id), str(running.id), str(old.id)], "the newest job comes first"
    assert output.splitlines()[0].split()[:5] == ["ID", "STATE", "KIND", "KEY", "ATTEMPTS"]
    assert re.search(r"queued\s+test\.sleep\s+k-new\s+0/5\s+runs in 5m", line_of(output, new))
    assert re.search(r"running .* 2/5\s+lease expired 30s ago", line_of(output, running))
    failed = line_of(output, old)
    assert re.search(r"failed .* 5/5\s+finished 2h ago\s+boom: the mail server said no$", failed)
    assert "Traceback" not in output, "list shows one line of last_error"


def test_list_shows_the_exception_line_of_a_traceback_and_cuts_a_long_line():
    """An exception escaping `run` leaves a traceback, whose first line says nothing."""
    crashed = make_job(
        "k1",
        last_error="Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'order'",
    )
    long = make_job("k2", last_error="x" * 200)

    output = jobs("list")[1]

    assert line_of(output, crashed).endswith("KeyError: 'order'")
    assert line_of(output, long).endswith("x" * 79 + "…"), "a long error line is cut to 80"


def test_list_filters_by_state_kind_error_and_expired_lease_like_the_admin():
    now = timezone.now()
    failed = make_job("f", state="failed", attempts=5, last_error="boom")
    queued = make_job("q", kind="test.sleep")
    retried = make_job("r", last_error="Retry: asked to retry")
    stale = make_job("s", state="running", lease_expires_at=now - timedelta(minutes=1))
    fresh = make_job("t", state="running", lease_expires_at=now + timedelta(minutes=1))

    def listed(*args: str) -> set[uuid.UUID]:
        status, output = jobs("list", *args)
        assert status == 0
        return {uuid.UUID(line.split()[0]) for line in output.splitlines()[1:]}

    assert listed("--state", "failed") == {failed.id}
    assert listed("--state", "failed", "--state", "queued") == {failed.id, queued.id, retried.id}
    assert listed("--kind", "test.sleep") == {queued.id}
    assert listed("--has-error") == {failed.id, retried.id}, "--has-error keeps jobs with an error"
    assert listed("--lease-expired") == {stale.id}, "only running jobs past their lease"
    assert fresh.id in listed("--state", "running")


def test_list_filters_by_queue_like_the_admin():
    mail = make_job("m", queue="emails")
    report = make_job("r", queue="reports")
    make_job("d")

    def listed(*args: str) -> set[uuid.UUID]:
        status, output = jobs("list", *args)
        assert status == 0
        return {uuid.UUID(line.split()[0]) for line in output.splitlines()[1:]}

    assert listed("--queue", "emails") == {mail.id}
    assert listed("--queue", "emails", "--queue", "reports") == {mail.id, report.id}


def test_list_stops_at_the_limit_and_says_more_match():
    for n in range(4):
        make_job(f"k{n}")

    status, output = jobs("list", "--limit", "3")

    assert status == 0
    lines = output.splitlines()
    assert len(lines) == 1 + 3 + 1, "a header, three jobs and a note"
    assert "more match" in lines[-1], "the operator learns the list was cut short"


def test_list_says_so_when_no_job_matches():
    assert jobs("list", "--state", "failed") == (0, "No jobs match.\n")


# --- show -----------------------------------------------------------------------


def test_show_prints_every_field_the_payload_as_json_and_the_whole_last_error():
    job = make_job(
        "k1",
        state="failed",
        attempts=5,
        payload={"order": 42, "lines": [1, 2]},
        last_error="boom\nTraceback (most recent call last):\n  File x\nValueError: no",
    )

    status, output = jobs("show", str(job.id))

    assert status == 0
    for field in Job._meta.concrete_fields:
        assert re.search(rf"^{field.name}:", output, re.M), f"show prints the field {field.name}"
    payload_text = output.split("payload:", 1)[1].split("\nstate:", 1)[0]
    assert json.loads(payload_text) == {"order": 42, "lines": [1, 2]}, "the payload is JSON"
    assert '\n    "order": 42' in output, "the payload is indented JSON, one key per line"
    assert "  ValueError: no" in output, "show prints last_error in full"
    assert re.search(r"^deadline:\s+-$", output, re.M), "an empty field shows as a dash"


def test_show_of_an_id_no_job_has_is_a_clean_error():
    missing = uuid.uuid4()
    with pytest.raises(CommandError, match=f"No job has the id {missing}"):
        jobs("show", str(missing))


# --- retry, cancel, run-now -----------------------------------------------------


def test_retry_queues_a_failed_job_again_and_exits_0_when_every_job_was_touched():
    job = make_job("k1", state="failed", attempts=5, last_error="boom")

    assert jobs("retry", str(job.id)) == (0, "1 touched\n")

    job.refresh_from_db()
    assert job.state == "queued", "retry goes through jobs.operations.retry, which requeues"
    assert job.attempts == 0, "a retried job gets a fresh attempt budget"


def test_retry_exits_1_and_gives_each_reason_when_any_job_was_skipped():
    failed = make_job("k1", state="failed", attempts=5)
    queued = make_job("k2")
    missing = uuid.uuid4()

    status, output = jobs("retry", str(failed.id), str(queued.id), str(missing))

    assert status == 1, "a script learns that not everything was retried"
    assert output == "1 touched; skipped 1 (queued, not failed or cancelled), 1 (no such job)\n"


def test_retry_skips_a_job_whose_identity_a_live_job_holds():
    failed = make_job("k1", state="failed", attempts=5)
    make_job("k1")

    status, output = jobs("retry", str(failed.id))

    assert status == 1
    assert output == "0 touched; skipped 1 (a live job already holds test.record:k1)\n"


def test_an_id_given_twice_is_acted_on_once():
    job = make_job("k1", state="failed", attempts=5)
    assert jobs("retry", str(job.id), str(job.id)) == (0, "1 touched\n")


def test_cancel_retires_a_queued_job_as_the_shell_user_and_the_handler_abandons_it_once(
    django_capture_on_commit_callbacks,
):
    job = make_job("k1")

    with django_capture_on_commit_callbacks(execute=True):  # abandon runs once it commits
        assert jobs("cancel", str(job.id)) == (0, "1 touched\n")

    job.refresh_from_db()
    assert job.state == "cancelled"
    assert re.fullmatch(r"cancelled by cli:\S.*", job.last_error), (
        "the reason names the command line and the user at it"
    )
    reasons = list(Abandonment.objects.values_list("reason", flat=True))
    assert reasons == [job.last_error], "cancel goes through jobs.operations: abandon runs once"


def test_cancel_records_who_cancelled_when_told_with_by():
    job = make_job("k1")
    done = make_job("k2", state="done")

    status, output = jobs("cancel", str(job.id), str(done.id), "--by", "alice")

    assert (status, output) == (1, "1 touched; skipped 1 (done, not waiting, queued or running)\n")
    job.refresh_from_db()
    assert job.last_error == "cancelled by alice"


def test_run_now_makes_a_queued_job_due_now():
    job = make_job("k1", run_at=timezone.now() + timedelta(hours=1))

    assert jobs("run-now", str(job.id)) == (0, "1 touched\n")

    job.refresh_from_db()
    assert job.run_at <= timezone.now(), "the job is due now"


# --- enqueue --------------------------------------------------------------------


@freeze_time("2026-03-01 12:00:00")
def test_enqueue_queues_a_job_with_its_payload_delay_and_attempt_budget():
    status, output = jobs(
        "enqueue", "test.record", "k1", "--payload", '{"order": 42}', "--delay", "300",
        "--max-attempts", "2",
    )  # fmt: skip

    assert status == 0
    job = Job.objects.get(kind="test.record", key="k1")
    assert output == (
        f"queued test.record:k1 (id {job.id}, queue default, priority 0, "
        "run_at 2026-03-01T12:05:00+00:00)\n"
    )
    assert job.payload == {"order": 42}
    assert job.max_attempts == 2
    assert job.run_at == timezone.now() + timedelta(seconds=300), "--delay is in seconds"


def test_enqueue_of_an_identity_a_live_job_holds_says_already_queued_and_exits_1():
    live = make_job("k1")

    status, output = jobs("enqueue", "test.record", "k1")

    assert status == 1, "a refused duplicate is not success"
    assert output == f"already queued (a live job holds test.record:k1: id {live.id}, queued)\n"
    assert Job.objects.count() == 1, "nothing was written"


def test_enqueue_warns_of_a_kind_no_handler_here_is_registered_for():
    status, output = jobs("enqueue", "no.such.kind", "k1")

    assert status == 0, "another deployment's runner may handle it, so it is queued"
    assert "warning: no handler for kind 'no.such.kind' is registered" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["test.record", ""], "key must be a non-empty string"),
        (["test.record", "k" * 300], "key is 300 characters"),
    ],
)
def test_enqueue_refuses_an_invalid_job_with_the_reason_and_writes_nothing(args, message):
    with pytest.raises(CommandError, match=f"Invalid job: {message}.*Nothing was queued"):
        jobs("enqueue", *args)
    assert not Job.objects.exists(), "an invalid job leaves no row behind"


# --- stats ----------------------------------------------------------------------


def test_stats_prints_the_dashboards_counts_lag_recent_settles_slowest_kinds_and_runners():
    now = timezone.now()
    make_job("q1", run_at=now - timedelta(minutes=2))
    make_job("q2", run_at=now + timedelta(hours=1))
    for n in range(3):
        make_job(f"d{n}", state="done", started_at=now - timedelta(seconds=4), finished_at=now)
    make_job(
        "f1",
        state="failed",
        kind="test.sleep",
        started_at=now - timedelta(seconds=9),
        finished_at=now,
    )
    factories.make_runner_row(
        "web-1", ["test.record"], now, pid=4242, version="0.1.0", max_concurrent=8
    )

    status, output = jobs("stats")

    assert status == 0
    for line in ("  queued     2", "  done       3", "  failed     1", "  cancelled  0"):
        assert line in output.splitlines(), f"the counts by state include {line.strip()!r}"
    assert re.search(r"^Lag: 2m\b", output, re.M), "the lag is the oldest ready job's wait"
    assert "last 5 minutes: done 3, failed 1, cancelled 0" in output
    assert "last hour:      done 3, failed 1, cancelled 0" in output
    slowest = output.split("Slowest kinds", 1)[1].splitlines()[1:3]
    assert slowest[0].split()[:2] == ["test.sleep", "9.000"], "the slowest kind comes first"
    assert slowest[1].split()[:2] == ["test.record", "4.000"]
    runner = r"web-1:4242\s+0\.1\.0\s+running 1/8\s+heartbeat now\s+kinds: test\.record"
    assert re.search(runner, output), "each runner shows its load, heartbeat and kinds"
    assert "no live runner serves" not in output, "the one live kind is served in its queue"


def test_stats_names_the_lane_of_each_runner_a_laned_process_reports():
    now = timezone.now()
    for lane in range(2):
        RunnerProcess.objects.create(
            hostname="web-1",
            pid=4242,
            version="0.1.0",
            started_at=now,
            heartbeat_at=now,
            max_concurrent=4,
            kinds=["test.record"],
            lane=lane,
            lanes=2,
        )

    status, output = jobs("stats")

    assert status == 0
    assert re.search(r"web-1:4242 lane 0 of 2\s+0\.1\.0\s+running 0/4", output), output
    assert re.search(r"web-1:4242 lane 1 of 2\s+0\.1\.0\s+running 0/4", output), output


def test_stats_says_so_when_no_runner_is_running_and_which_kinds_and_queues_wait_for_one():
    make_job("q1", kind="test.sleep")

    output = jobs("stats")[1]

    assert "Runners: none" in output
    assert "Live jobs no live runner serves: test.sleep in queue default" in output


def test_stats_json_prints_stats_as_json_for_scripts():
    make_job("q1")
    make_job("f1", state="failed")

    status, output = jobs("stats", "--json")

    assert status == 0
    printed = json.loads(output)
    expected = collect().as_json()
    assert printed.keys() == {*expected.keys(), "healthy_running"}, (
        "the JSON is Stats.as_json(), every key, and healthy_running"
    )
    assert printed["by_state"] == expected["by_state"]
    assert printed["by_state"]["failed"] == 1


# --- Bad arguments --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bogus"], "invalid choice: 'bogus'"),
        ([], "the following arguments are required: SUBCOMMAND"),
        (["show", "not-a-uuid"], "'not-a-uuid' is not a job id"),
        (["retry", str(uuid.UUID(int=1)), "42"], "'42' is too short to find a job by"),
        (["retry", str(uuid.UUID(int=1)), "3f00a956x"], "'3f00a956x' is not a job id"),
        (["enqueue", "k", "x", "--payload", "{nope"], "--payload is not valid JSON"),
        (["enqueue", "k", "x", "--payload", "[1, 2]"], "must be a JSON object such as"),
        (
            ["enqueue", "k", "x", "--payload", "7"],
            "a JSON object such as '{\"order\": 42}', not a number",
        ),
        (["enqueue", "k", "x", "--delay", "soon"], "--delay: must be a number of seconds from"),
        (["list", "--state", "stuck"], "invalid choice: 'stuck'"),
    ],
)
def test_a_bad_argument_is_refused_with_a_sentence_saying_what_is_wrong(args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        jobs(*args)
    assert not Job.objects.exists(), "a refused command writes nothing"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list", "--limit", "0"], "--limit: must be a whole number from 1 to 10,000, not '0'"),
        (["list", "--limit", "10001"], "--limit: must be a whole number from 1 to 10,000"),
        (["list", "--limit", "99999999999999999999"], "not '99999999999999999999'"),
        (["list", "--limit", "2.5"], "--limit: must be a whole number"),
        (
            ["enqueue", "test.record", "k1", "--max-attempts", "0"],
            "--max-attempts: must be a whole number from 1 to 1,000 (the bounds of the "
            "max_attempts setting), not '0'",
        ),
        (["enqueue", "test.record", "k1", "--max-attempts", "1001"], "from 1 to 1,000"),
        (["enqueue", "test.record", "k1", "--max-attempts", "2147483648"], "from 1 to 1,000"),
        (
            ["enqueue", "test.record", "k1", "--delay", "-5"],
            "--delay: must be a number of seconds from 0 to 315,360,000 (ten years), not '-5'",
        ),
        (["enqueue", "test.record", "k1", "--delay", "315360000.5"], "from 0 to 315,360,000"),
        (["enqueue", "test.record", "k1", "--delay", "1e300"], "from 0 to 315,360,000"),
        (["enqueue", "test.record", "k1", "--delay", "nan"], "from 0 to 315,360,000"),
        (["enqueue", "test.record", "k1", "--delay", "inf"], "from 0 to 315,360,000"),
    ],
)
def test_a_number_out_of_its_range_is_refused_by_the_parser_with_its_range_and_writes_nothing(
    args, message
):
    """Refused before the database is asked: past 64 bits a --limit made it answer
    "datatype mismatch", which says nothing of the limit."""
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"^Error: argument .*" + re.escape(message)):
        call_command("jobs", *args, stdout=out)
    assert out.getvalue() == "", "nothing is printed"
    assert not Job.objects.exists(), "nothing is written"


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--limit", "1"],
        ["list", "--limit", "10000"],
        ["enqueue", "test.record", "k1", "--max-attempts", "1"],
        ["enqueue", "test.record", "k2", "--max-attempts", "1000"],
        ["enqueue", "test.record", "k3", "--delay", "0"],
        ["enqueue", "test.record", "k4", "--delay", "315360000"],
    ],
)
def test_each_end_of_a_numbers_range_is_taken(args):
    assert jobs(*args)[0] == 0
