"""Failover with real processes and signals: heartbeat leases keep a live
runner's long attempt and give a stopped runner's rows to another within three
heartbeats; a grace period that runs out hands attempts back due at once; a
handler that never returns costs its process, not the queue."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.utils import timezone

from jobs import JobSpec, enqueue, enqueue_many
from jobs.history import Outcome
from jobs.models import Job
from jobs.runner.process import EXIT_HARD_LIMIT
from tests.acceptance import wait_for_attempt, wait_for_log
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

HEARTBEAT = 2
#: test.sleep's budget: two minutes, far past every attempt here.
LONG_BUDGET = {"TEST_SLEEP_LEASE": "120"}


def sleeping(key: str, seconds: float) -> Job:
    """A test.sleep job whose first attempt sleeps `seconds` (later ones do not)."""
    spec = JobSpec.now("test.sleep", key).with_payload({"seconds": seconds, "sleep_on": [1]})
    assert enqueue(spec)
    return Job.objects.get(key=key)


def test_a_live_runners_long_attempt_is_never_taken_a_stopped_runners_is_after_its_lease(
    runjobs, configure
):
    configure(heartbeat_seconds=HEARTBEAT, poll_interval_ms=100)
    long = sleeping("long", 4 * HEARTBEAT)  # outlives the lease written at claim
    first = runjobs(env=LONG_BUDGET)
    wait_for_attempt(long, 1, first)
    second = runjobs(env=LONG_BUDGET)
    wait_for_log(second, "runner_started")
    samples = []
    while not Job.objects.filter(key="long", state="done").exists():
        samples.append(Job.objects.values_list("attempts", "claimed_by").get(key="long"))
        assert len(samples) < 500, "the long attempt ends"
        time.sleep(0.05)
    assert {attempts for attempts, _ in samples} == {1}, "never reclaimed while its runner lives"
    assert Execution.objects.filter(key="long").count() == 1

    stopped = sleeping("stopped", 6 * HEARTBEAT)
    wait_until(lambda: Execution.objects.filter(key="stopped").exists(), 10, "it starts")
    stopped.refresh_from_db()
    held_by_first = (stopped.claimed_by or "").endswith(f":{first.pid}")
    holder, other = (first, second) if held_by_first else (second, first)
    os.kill(holder.pid, signal.SIGSTOP)
    paused = time.monotonic()
    try:
        wait_until(
            lambda: Job.objects.get(key="stopped").attempts == 2, 5 * HEARTBEAT, "taken over"
        )
        took = time.monotonic() - paused
        print(
            f"\na stopped runner's row was taken after {took:.2f} s (3 heartbeats = "
            f"{3 * HEARTBEAT} s)"
        )
        assert took <= 3 * HEARTBEAT + 1.5, "within three heartbeats (and a poll)"
        wait_until(lambda: Job.objects.get(key="stopped").state == "done", 10, "and run")
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    wait_for_log(holder, "job_settle_lost", timeout=6 * HEARTBEAT + 5)
    job = Job.objects.get(key="stopped")
    assert (job.state, job.attempts) == ("done", 2), "the late settle changed nothing"
    assert Execution.objects.filter(key="stopped").count() == 2
    assert f":{other.pid}" in (job.claimed_by or "")


def test_with_a_one_second_grace_eight_sleeping_attempts_are_handed_back_due_at_once(
    runjobs, configure
):
    configure(poll_interval_ms=100)
    specs = [
        JobSpec.now("test.sleep", f"slow-{n}").with_payload({"seconds": 30, "sleep_on": [1]})
        for n in range(8)
    ]
    assert all(enqueue_many(specs))
    process = runjobs("--grace", "1", env=LONG_BUDGET)
    wait_until(lambda: Execution.objects.count() == 8, 15, "eight attempts run")

    signalled, signalled_at = time.monotonic(), timezone.now()
    os.kill(process.pid, signal.SIGTERM)
    status = process.wait(timeout=15)
    took = time.monotonic() - signalled
    print(f"\nexited {took:.2f} s after SIGTERM with a 1 s grace")

    assert status != 0, "it gave up on running attempts"
    assert took < 2.0, f"within the grace plus a second, not {took:.2f} s"
    rows = list(Job.objects.filter(key__startswith="slow-"))
    assert {row.state for row in rows} == {"queued"}
    assert all(signalled_at <= row.run_at <= timezone.now() for row in rows), "due at once"
    assert {row.attempt_history[-1].outcome for row in rows} == {Outcome.RELEASED}

    started = time.monotonic()
    runjobs(env=LONG_BUDGET)
    wait_until(
        lambda: Job.objects.filter(key__startswith="slow-", state="done").count() == 8,
        15,
        "another runner takes them at once",
    )
    print(f"another runner finished the eight {time.monotonic() - started:.2f} s after starting")


def test_a_handler_that_never_returns_costs_its_process_which_finishes_the_rest_and_exits_3(
    runjobs, configure
):
    configure(hard_kill_after=1, retry_base_seconds=60, poll_interval_ms=100)
    hung = sleeping("hung", 3600)
    others = [
        JobSpec.now("test.limited", f"other-{n}").with_payload({"seconds": 3}) for n in (1, 2)
    ]
    assert all(enqueue_many(others))
    process = runjobs("--grace", "10", env={"TEST_SLEEP_LEASE": "1"})
    wait_for_attempt(hung, 1, process)
    started = time.monotonic()

    status = process.wait(timeout=30)
    took = time.monotonic() - started
    print(
        f"\nthe process exited {took:.2f} s after the hung attempt began (budget 1 s + "
        "hard_kill_after 1 s, then the others' 3 s)"
    )

    assert status == EXIT_HARD_LIMIT, process.output()
    assert process.output().count("runner_hard_limit") == 1, "one line says why"
    assert took < 1 + 1 + 10 + 2, "no longer than budget + hard_kill_after + grace"
    hung.refresh_from_db()
    assert (hung.state, hung.attempts) == ("queued", 1), "the hung attempt is retried"
    assert hung.attempt_history[-1].outcome == Outcome.TIMED_OUT
    done = Job.objects.filter(key__startswith="other-", state="done").count()
    assert done == 2, "the process's other attempts finished normally"
