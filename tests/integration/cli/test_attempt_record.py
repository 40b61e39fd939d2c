"""`manage.py jobs` and issue 20, "every attempt on the record": who holds a job,
whether that holder is still there, and what each attempt that did not end done
left behind (`jobs.history`, `jobs.holding`), at a shell.

Rows are written directly (`tests.factories.make_job`), with the attempt record
built as a runner would write it (`history.record`, `history.appended`), and
runners as their heartbeats leave them: fresh, or older than
`RunnerProcess.STALE_AFTER`.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from freezegun import freeze_time

from jobs import history
from jobs.history import Outcome
from jobs.models import RunnerProcess
from tests import factories
from tests.integration.cli.test_cli import jobs, line_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen")]

NOW = "2026-03-01 12:00:00"

make_job = partial(factories.make_job, leased=False)

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "orders/relay.py", line 12, in run\n'
    "    send(order)\n"
    "ValueError: upstream said no"
)


@pytest.fixture
def frozen():
    with freeze_time(NOW):
        yield


def runner(hostname: str = "web-1", pid: int = 4242, *, gone: bool = False, **fields: Any):
    """A runner row whose last heartbeat is now, or (`gone`) older than STALE_AFTER."""
    now = timezone.now()
    heartbeat = now - RunnerProcess.STALE_AFTER - timedelta(seconds=1) if gone else now
    values: dict[str, Any] = {
        "version": "0.1.0",
        "started_at": now - timedelta(hours=1),
        "heartbeat_at": heartbeat,
        "max_concurrent": 8,
        "kinds": ["test.record"],
        **fields,
    }
    return RunnerProcess.objects.create(hostname=hostname, pid=pid, **values)


def attempt_record(
    count: int, *, runner: str = "web-1:4242", traceback: str = TRACEBACK, error: str = ""
) -> list[dict[str, Any]]:
    """`Job.errors` after `count` attempts that did not end done, one a minute
    from an hour ago, each lasting 4 seconds; the last one failed."""
    start = timezone.now() - timedelta(hours=1)
    stored: list[dict[str, Any]] = []
    for n in range(1, count + 1):
        began = start + timedelta(minutes=n)
        entry = history.record(
            attempt=n,
            started_at=began,
            ended_at=began + timedelta(seconds=4),
            runner=runner,
            outcome=Outcome.FAILED if n == count else Outcome.RETRY,
            error=error or f"ValueError: upstream said no (try {n})",
            exception="builtins.ValueError",
            traceback=traceback,
        )
        stored = history.appended(stored, entry)
    return stored


def shown(job) -> str:
    status, output = jobs("show", str(job.id))
    assert status == 0
    return output


def section(output: str) -> str:
    """The attempt history: from its heading to the end."""
    assert "\nAttempt history: " in output, output
    return "Attempt history: " + output.split("\nAttempt history: ", 1)[1]


def blocks(output: str) -> list[str]:
    """Each entry's block of the attempt history, in the order printed."""
    return re.split(r"\n(?=  #\d)", section(output))[1:]


# --- show: the holder -----------------------------------------------------------


def test_show_prints_the_runner_that_claimed_the_job():
    runner()
    job = make_job("k1", state="running", claimed_by="web-1:4242", attempts=1)

    assert re.search(r"^claimed_by:\s+web-1:4242$", shown(job), re.M)


def test_show_says_runner_gone_beside_the_runner_of_a_running_job_whose_runner_is_gone():
    runner(gone=True)
    now = timezone.now()
    job = make_job(
        "k1",
        state="running",
        claimed_by="web-1:4242",
        lease_expires_at=now + timedelta(minutes=4),
    )

    assert re.search(r"^claimed_by:\s+web-1:4242 \(runner gone\)$", shown(job), re.M)


def test_show_says_lease_expired_beside_the_live_runner_of_a_running_job_past_its_lease():
    runner()
    now = timezone.now()
    job = make_job(
        "k1",
        state="running",
        claimed_by="web-1:4242",
        lease_expires_at=now - timedelta(seconds=30),
    )

    assert re.search(r"^claimed_by:\s+web-1:4242 \(lease expired\)$", shown(job), re.M)


def test_show_says_nothing_of_a_gone_runner_for_a_job_that_is_not_running():
    """A settled job's runner may have exited long since: that is no fault."""
    job = make_job("k1", state="failed", claimed_by="web-1:4242")

    assert re.search(r"^claimed_by:\s+web-1:4242$", shown(job), re.M)


# --- show: the attempt history ---------------------------------------------------


def test_show_prints_the_count_of_attempts_that_did_not_end_done_then_one_block_each_newest_first():
    job = make_job("k1", state="failed", attempts=5, errors=attempt_record(5))

    output = shown(job)

    assert section(output).startswith("Attempt history: 5 attempts did not end done; newest first")
    assert "are kept" not in output, "nothing was dropped"
    numbers = [block.split()[0].removeprefix("#") for block in blocks(output)]
    assert numbers == ["5", "4", "3", "2", "1"], "newest first, as the admin shows it"
    assert output.index("\nhandler:") < output.index("\nAttempt history:"), (
        "the history comes after every field"
    )
    assert re.search(r"^errors:\s+the attempt history, below$", output, re.M)


def test_show_says_the_last_20_are_kept_when_older_entries_were_dropped():
    job = make_job("k1", state="failed", attempts=25, errors=attempt_record(25))

    output = shown(job)

    assert section(output).startswith(
        "Attempt history: 25 attempts did not end done; the last 20 are kept; newest first"
    )
    numbers = [block.split()[0].removeprefix("#") for block in blocks(output)]
    assert numbers == [str(n) for n in range(25, 5, -1)], "the kept 20, numbered among all 25"


def test_each_history_block_has_its_number_attempt_outcome_start_to_the_second_with_zone_took_runner_error_and_exception_class_path(  # noqa: E501
    settings,
):
    settings.TIME_ZONE = "Europe/Paris"
    stored = attempt_record(2, traceback="")
    cancelled = history.record(
        attempt=None,
        started_at=None,
        ended_at=timezone.now(),
        runner=None,
        outcome=Outcome.CANCELLED,
        error="cancelled by alice",
    )
    job = make_job("k1", state="cancelled", attempts=2, errors=history.appended(stored, cancelled))

    newest, failed, _ = blocks(shown(job))

    assert newest.splitlines() == [
        "  #3  no attempt  cancelled",
        "    started:   - (ended 2026-03-01 13:00:00 CET)",
        "    runner:    -",
        "    error:     cancelled by alice",
        "    exception: jobs.history.JobCancelled",
    ], "an entry with no exception names the class its end stands for"
    assert failed.splitlines() == [
        "  #2  attempt 2  failed",
        "    started:   2026-03-01 12:02:00 CET, took 4s",
        "    runner:    web-1:4242",
        "    error:     ValueError: upstream said no (try 2)",
        "    exception: builtins.ValueError",
    ], "started in the site's zone to the second, how long it took, who ran it, what broke"


def test_show_prints_each_traceback_in_full_indented_under_its_entry():
    job = make_job("k1", state="failed", attempts=2, errors=attempt_record(2))

    for block in blocks(shown(job)):
        lines = block.splitlines()
        start = lines.index("    traceback:")
        assert lines[start + 1 :] == [f"      {line}" for line in TRACEBACK.split("\n")], (
            "every line of the traceback, indented below the entry's fields"
        )


def test_show_escapes_control_characters_in_runner_names_errors_and_traceback_lines():
    hostile = "web-1\n    error:     forged\x1b[2J"
    job = make_job(
        "k1",
        state="failed",
        attempts=1,
        claimed_by=hostile,
        errors=attempt_record(
            1,
            runner=hostile,
            error="no\nstate: done\x1b]0;owned\x07",
            traceback="Traceback (most recent call last):\r\n  File \x1b[31mx\nKeyError: 'a'",
        ),
    )

    output = shown(job)

    for raw in ("\x1b", "\x07", "\r"):
        assert raw not in output, f"{raw!r} never reaches the terminal"
    [block] = blocks(output)
    assert block.splitlines() == [
        "  #1  attempt 1  failed",
        "    started:   2026-03-01 11:01:00 UTC, took 4s",
        "    runner:    web-1\\n    error:     forged\\x1b[2J",
        "    error:     no\\nstate: done\\x1b]0;owned\\x07",
        "    exception: builtins.ValueError",
        "    traceback:",
        "      Traceback (most recent call last):",
        "        File \\x1b[31mx",
        "      KeyError: 'a'",
    ], "a name's or an error's newline is escaped; a traceback's own newlines are its lines"
    assert re.search(r"^claimed_by:\s+web-1\\n    error:     forged\\x1b\[2J$", output, re.M)
    assert len(re.findall(r"^state:", output, re.M)) == 1, "no forged field line"


def test_show_of_a_job_with_no_attempt_record_says_none_and_prints_no_history():
    job = make_job("k1")

    output = shown(job)

    assert re.search(r"^errors:\s+\(none\)$", output, re.M)
    assert re.search(r"^claimed_by:\s+-$", output, re.M), "never claimed"
    assert "Attempt history" not in output


def test_show_json_carries_every_field_the_entries_as_entry_as_json_claimed_by_and_why_stuck():
    runner(gone=True)
    job = make_job(
        "k1", state="running", attempts=3, claimed_by="web-1:4242", errors=attempt_record(2)
    )

    status, output = jobs("show", str(job.id), "--json")

    assert status == 0
    printed = json.loads(output)
    assert printed["errors"] == [entry.as_json() for entry in job.attempt_history]
    assert printed["claimed_by"] == "web-1:4242"
    assert printed["stuck"] == "runner gone"
    assert printed["error_count"] == 2
    assert printed["id"] == str(job.id)
    assert printed["state"] == "running"
    assert all("\x1b" not in line for line in output.splitlines())


# --- list -----------------------------------------------------------------------


def test_list_says_runner_gone_where_it_shows_a_running_jobs_lease_when_its_runner_is_gone():
    runner("web-1", gone=True)
    runner("web-2")
    later = timezone.now() + timedelta(minutes=4)
    running = partial(make_job, state="running", attempts=1, lease_expires_at=later)
    gone = running("k1", claimed_by="web-1:4242")
    held = running("k2", claimed_by="web-2:4242")

    status, output = jobs("list")

    assert status == 0
    assert re.search(r"1/5\s+runner gone, lease ends in 4m$", line_of(output, gone)), output
    assert re.search(r"1/5\s+lease ends in 4m$", line_of(output, held)), "a live runner's job"
    assert "runner gone" not in line_of(output, held)


def test_list_reads_the_runners_once_per_listing_not_once_per_row():
    runner(gone=True)

    def queries(running: int) -> int:
        for n in range(running):
            make_job(f"k{running}-{n}", state="running", claimed_by="web-1:4242", attempts=1)
        with CaptureQueriesContext(connection) as captured:
            assert jobs("list")[0] == 0
        return len(captured.captured_queries)

    assert queries(1) == queries(5), "the query count does not grow with the rows listed"


# --- stats ----------------------------------------------------------------------


def test_stats_shows_running_as_healthy_and_stuck_apart():
    runner("web-1")
    runner("web-2", gone=True)
    now = timezone.now()
    make_job("healthy", state="running", claimed_by="web-1:4242", attempts=1,
             lease_expires_at=now + timedelta(minutes=4))  # fmt: skip
    make_job("gone", state="running", claimed_by="web-2:4242", attempts=1,
             lease_expires_at=now + timedelta(minutes=4))  # fmt: skip
    make_job("expired", state="running", claimed_by="web-1:4242", attempts=1,
             lease_expires_at=now - timedelta(seconds=5))  # fmt: skip

    output = jobs("stats")[1]

    split = "  running    3 (1 healthy, 2 stuck: runner gone or lease expired)"
    assert split in output.splitlines(), output


def test_stats_shows_a_plain_running_count_when_no_running_job_is_stuck():
    runner("web-1")
    make_job("healthy", state="running", claimed_by="web-1:4242", attempts=1,
             lease_expires_at=timezone.now() + timedelta(minutes=4))  # fmt: skip

    output = jobs("stats")[1]

    assert "  running    1" in output.splitlines()
    assert "stuck" not in output


def test_stats_lag_is_the_wait_of_the_oldest_due_job_whatever_holds_it():
    runner("web-1", kinds=["test.record"])
    now = timezone.now()
    make_job("handled", kind="test.record", run_at=now - timedelta(minutes=2))
    make_job("orphan", kind="test.sleep", run_at=now - timedelta(hours=3))

    output = jobs("stats")[1]

    lag = r"^Lag: 3h \(how long the oldest due job has waited past its run_at, whatever holds it\)$"
    assert re.search(lag, output, re.M), "the job no live runner handles, 3h old, is the lag"
    assert re.search(r"^  runner: +1 job +\(a runner\) +oldest due 3h ago$", output, re.M), output


def test_stats_says_how_many_due_jobs_wait_for_a_runner_and_the_oldest_wait():
    runner("web-1", kinds=["test.record"])
    runner("web-2", gone=True, kinds=["test.sleep"])
    now = timezone.now()
    make_job("o1", kind="test.sleep", run_at=now - timedelta(hours=3))
    make_job("o2", kind="test.sleep", run_at=now - timedelta(minutes=5))

    output = jobs("stats")[1]

    assert re.search(r"^  runner: +2 jobs +\(a runner\) +oldest due 3h ago$", output, re.M), output
    assert "Live jobs no live runner serves: test.sleep in queue default" in output


def test_stats_prints_no_waiting_for_a_runner_line_when_every_due_job_is_served():
    runner("web-1", kinds=["test.record"])
    make_job("k1", kind="test.record")

    output = jobs("stats")[1]
    assert "runner:" not in output
    assert "no live runner serves" not in output


def test_stats_shows_each_kinds_done_and_failed_in_the_last_hour():
    now = timezone.now()
    for n in range(3):
        make_job(f"d{n}", state="done", finished_at=now - timedelta(minutes=10))
    make_job("f1", state="failed", finished_at=now - timedelta(minutes=10))
    make_job("f2", state="failed", kind="test.sleep", finished_at=now - timedelta(minutes=1))
    make_job("old", state="done", kind="test.sleep", finished_at=now - timedelta(hours=2))

    output = jobs("stats")[1]

    rows = output.split("Done and failed in the last hour, by kind:\n", 1)[1].splitlines()[:2]
    assert [row.split() for row in rows] == [
        ["test.record", "done", "3", "failed", "1"],
        ["test.sleep", "done", "0", "failed", "1"],
    ], "settles over an hour ago are not counted"


def test_stats_json_carries_stuck_healthy_running_unhandled_and_kinds_last_hour():
    runner("web-1", gone=True, kinds=["test.sleep"])
    now = timezone.now()
    make_job("r1", state="running", claimed_by="web-1:4242", attempts=1,
             lease_expires_at=now + timedelta(minutes=4))  # fmt: skip
    make_job("o1", kind="test.sleep", run_at=now - timedelta(minutes=2))
    make_job("d1", state="done", finished_at=now)

    status, output = jobs("stats", "--json")

    assert status == 0
    printed = json.loads(output)
    assert printed["stuck"] == 1
    assert printed["healthy_running"] == 0
    assert printed["unhandled"] == 1
    assert printed["unhandled_wait_seconds"] == 120.0
    assert printed["kinds_last_hour"] == {"test.record": {"done": 1, "failed": 0}}


def test_each_runner_line_names_the_runner_as_a_claim_writes_it():
    process = runner("web-1", lane=1, lanes=2)
    job = make_job("k1", state="running", claimed_by=process.name, attempts=1)

    output = jobs("stats")[1]

    runners = output.split("Runners:\n", 1)[1].splitlines()
    assert runners[0].startswith(f"  {job.claimed_by}  "), "the name `show` prints as claimed_by"
    assert job.claimed_by == "web-1:4242 lane 1 of 2"
