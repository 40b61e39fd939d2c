"""Signals to a real `runjobs` process, and its command line.

SIGTERM is how systemd, Kubernetes and supervisord stop a worker, and SIGINT
is Ctrl-C: either must stop claiming, let running attempts settle within the
grace period, and exit 0, so a deploy never turns finished work into a retry.
A second signal, or an expired grace, exits at once and non-zero; whatever was
still running is released: back to the queue, due now, the attempt on its
record.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from jobs import JobSpec, enqueue
from jobs.history import Outcome
from jobs.models import Job
from jobs.notifier import for_database
from tests.acceptance import wait_for_attempt, wait_for_log
from tests.conftest import RunJobs
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

#: Leases far longer than any of these tests, so no runner ever times out or
#: takes over the attempts they watch; and a short poll, so a runner that kept
#: claiming after a signal would claim the late job within a fraction of a second.
ENV = {"TEST_SLEEP_LEASE": "30", "JOBS_POLL_INTERVAL_MS": "100"}


#: How long a stopping runner may take from the signal (idle) or the last
#: attempt's settle (busy) to its last log line. It measured 4 to 10 ms; it
#: was up to half a second when the listener saw the stop only at its next
#: 0.5 s tick.
PROMPT = timedelta(seconds=0.25)


def logged_at(process: RunJobs, event: str) -> datetime:
    """When `process` logged `event` (its terminal line's time, to the millisecond),
    in the current time zone, as `runjobs` writes it."""
    [line] = [line for line in process.output().splitlines() if f" {event} " in f"{line} "]
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return timezone.make_aware(stamp)


def start_sleeping(runjobs, key: str, seconds: float, *args: str) -> tuple[Job, RunJobs]:
    """Queue a test.sleep job of `seconds`, start `runjobs *args`, and wait until it runs."""
    assert enqueue(JobSpec.now("test.sleep", key).with_payload({"seconds": seconds}))
    job = Job.objects.get(kind="test.sleep", key=key)
    process = runjobs(*args, env=ENV)
    wait_for_attempt(job, 1, process)
    return job, process


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_stops_claiming_lets_the_running_attempt_settle_and_exits_zero(
    runjobs, signum
):
    """The everyday deploy: the attempt in hand finishes and is recorded, nothing new starts."""
    job, process = start_sleeping(runjobs, "slow", 2, "--grace", "10")

    signalled = time.monotonic()
    os.kill(process.pid, signum)
    wait_for_log(process, "runner_stopping")
    assert enqueue(JobSpec.now("test.record", "after-signal"))
    status = process.wait(timeout=15)
    took = time.monotonic() - signalled

    assert status == 0, f"a runner that finished its attempts in time exits 0:\n{process.output()}"
    assert took < 10, f"the runner exits within its 10 s grace period, not after {took:.1f}s"
    job.refresh_from_db()
    assert job.state == "done", "the attempt running at the signal finishes and settles done"
    assert Execution.objects.get(job_id=job.id).finished_at is not None, (
        "the handler ran to its end rather than being cut off"
    )
    late = Job.objects.get(kind="test.record", key="after-signal")
    assert (late.state, late.attempts) == ("queued", 0), (
        "a job enqueued after the signal is left queued for the next runner, not claimed"
    )
    assert not Execution.objects.filter(key="after-signal").exists(), (
        "a stopping runner never runs a job it was not already running"
    )
    assert not Job.objects.filter(state="running").exists(), "a clean stop leaves nothing running"


def test_an_idle_runner_exits_promptly_after_a_stop_signal_without_waiting_for_a_tick(
    runjobs,
):
    """A deploy stops every idle runner: each used to wait out its listener's
    0.5 s tick (on PostgreSQL) before it could exit."""
    process = runjobs(env=ENV)
    listens = for_database().wakes_other_processes
    wait_for_log(process, "runner_listening" if listens else "runner_started", 20)

    os.kill(process.pid, signal.SIGTERM)
    status = process.wait(timeout=10)

    assert status == 0, f"an idle runner stops cleanly:\n{process.output()}"
    took = logged_at(process, "runner_stopped") - logged_at(process, "runner_stopping")
    assert took < PROMPT, (
        f"an idle runner is stopped {took.total_seconds():.3f}s after the signal, "
        f"not at its listener's next tick:\n{process.output()}"
    )


def test_a_runner_signalled_mid_attempt_exits_as_soon_as_that_attempt_settles(runjobs):
    """Nothing is left to wait for once the last attempt's row is settled: the
    process goes then, not a poll or a tick later."""
    job, process = start_sleeping(runjobs, "last", 1, "--grace", "10")

    os.kill(process.pid, signal.SIGTERM)
    wait_for_log(process, "runner_stopping")
    status = process.wait(timeout=10)

    assert status == 0, f"the attempt settled within the grace:\n{process.output()}"
    job.refresh_from_db()
    assert job.state == "done", "the attempt running at the signal settles done"
    finished_at = Execution.objects.get(job_id=job.id).finished_at
    assert finished_at is not None
    took = logged_at(process, "runner_stopped") - finished_at
    assert took < PROMPT, (
        f"the runner is stopped {took.total_seconds():.3f}s after its last attempt "
        f"ended:\n{process.output()}"
    )


def test_a_stop_signal_stops_every_lane_and_lets_each_lanes_attempt_settle(runjobs, configure):
    """With `--lanes 2` and `max_concurrent=2` each lane has one slot, so the
    two sleeping attempts run in different lanes: one signal must stop both
    and wait for both."""
    configure(max_concurrent=2)
    for key in ("a", "b"):
        assert enqueue(JobSpec.now("test.sleep", key).with_payload({"seconds": 2}))
    jobs = list(Job.objects.filter(kind="test.sleep"))
    process = runjobs("--lanes", "2", "--grace", "10", env=ENV)
    for job in jobs:
        wait_for_attempt(job, 1, process)

    os.kill(process.pid, signal.SIGTERM)
    status = process.wait(timeout=15)

    assert status == 0, f"both lanes finished their attempts in time:\n{process.output()}"
    assert set(Job.objects.filter(kind="test.sleep").values_list("state", flat=True)) == {"done"}


@pytest.mark.parametrize("lanes", ["0", "9", "two"])
def test_runjobs_refuses_a_number_of_lanes_out_of_range_with_a_clear_error(runjobs, lanes):
    process = runjobs("--lanes", lanes)
    status = process.wait(timeout=15)
    output = process.output()

    assert status != 0
    assert "--lanes" in output, f"the error names the option at fault:\n{output}"
    assert "Traceback" not in output
    assert "runner_started" not in output


def test_a_second_stop_signal_exits_at_once_nonzero_and_leaves_the_row_running(runjobs):
    """The operator's "stop now": the process goes, and the lease, not the process, recovers."""
    job, process = start_sleeping(runjobs, "stuck", 30)

    os.kill(process.pid, signal.SIGTERM)
    wait_for_log(process, "runner_stopping")
    signalled = time.monotonic()
    os.kill(process.pid, signal.SIGTERM)
    status = process.wait(timeout=10)
    took = time.monotonic() - signalled

    assert status != 0, "a runner killed by a second signal says so with a non-zero status"
    assert took < 3, f"a second signal exits at once, not after {took:.1f}s"
    assert "runner_killed" in process.output(), "the runner logs that it was killed"
    job.refresh_from_db()
    assert job.state == "running", "the interrupted attempt's row stays running"
    assert job.lease_expires_at is not None
    assert job.lease_expires_at > timezone.now(), (
        "the row keeps its lease, so a runner takes it over only once the lease expires"
    )
    assert Execution.objects.get(job_id=job.id).finished_at is None, (
        "the handler was still running when the process went"
    )


def test_when_the_grace_period_runs_out_the_process_exits_nonzero_releasing_the_row(
    runjobs,
):
    """`--grace` bounds a deploy: a handler that outlasts it does not hold the process up,
    and its row goes back to the queue, due at once, with the attempt on the record."""
    job, process = start_sleeping(runjobs, "long", 10, "--grace", "1")

    signalled, signalled_at = time.monotonic(), timezone.now()
    os.kill(process.pid, signal.SIGTERM)
    status = process.wait(timeout=15)
    took = time.monotonic() - signalled

    assert status != 0, "a runner that gave up on a running attempt exits non-zero"
    assert "runner_grace_expired" in process.output(), "the runner logs that the grace ran out"
    assert 0.9 <= took < 3, (
        f"the runner exits about 1 s (its grace) after the signal, not {took:.1f}s"
    )
    job.refresh_from_db()
    assert Execution.objects.get(job_id=job.id).finished_at is None, (
        "the handler was still running when the process went"
    )
    assert job.state == "queued", "the attempt still running when the grace ran out is released"
    assert signalled_at <= job.run_at <= timezone.now(), "due now: another runner takes it at once"
    assert job.attempts == 1, "the released attempt still counts"
    [released] = job.attempt_history
    assert (released.attempt, released.outcome, released.runner) == (
        1,
        Outcome.RELEASED,
        f"{socket.gethostname()}:{process.pid}",
    ), "the attempt is on the record as released by the runner that stopped"
    assert released.exception_class_path == "jobs.history.AttemptReleased"


@pytest.mark.parametrize("grace", ["-1", "abc"])
def test_runjobs_refuses_a_grace_that_is_not_a_non_negative_number_with_a_clear_error(
    runjobs, grace
):
    """A typo in a unit file must read as a usage error, not as a crash to debug."""
    process = runjobs("--grace", grace)
    status = process.wait(timeout=15)
    output = process.output()

    assert status != 0, f"runjobs --grace {grace} exits non-zero"
    assert "--grace" in output, f"the error names the option at fault:\n{output}"
    assert "Traceback" not in output, f"a bad argument is a usage error, not a traceback:\n{output}"
    assert "runner_started" not in output, "a runner with a bad argument never starts"


def test_runjobs_burst_with_nothing_queued_exits_zero(runjobs):
    """Cron and CI run `--burst` on an empty queue all the time; that is success."""
    process = runjobs("--burst")
    status = process.wait(timeout=15)

    assert status == 0, f"a burst over an empty queue exits 0:\n{process.output()}"
    assert not Job.objects.filter(state="running").exists(), "a burst leaves nothing running"
