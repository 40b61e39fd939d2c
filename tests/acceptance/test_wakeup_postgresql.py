"""Cross-process wake-up on PostgreSQL: an enqueue in one process starts the job in a
`runjobs` in another within milliseconds, not at the next poll."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from jobs.operations import run_now
from jobs.store.postgresql.sql import WAKEUP_CHANNEL
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]

#: Long enough that only a wake-up, never a poll, can explain a prompt start.
AN_HOUR_MS = 3_600_000


def wait_for_listening(process) -> None:
    assert wait_until(lambda: "runner_listening" in process.output(), 20), process.output()


def test_a_job_enqueued_in_another_process_starts_at_once_despite_an_hour_long_poll(
    runjobs, configure
):
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env={"JOBS_CONFIG_CHECK_SECONDS": "3600"})
    wait_for_listening(process)
    time.sleep(0.2)  # let the runner finish its first pass and go idle
    assert enqueue(JobSpec.now("test.record", "web"))
    assert wait_until(lambda: Execution.objects.filter(key="web").exists(), 5), process.output()


def test_run_now_in_another_process_wakes_the_runner(runjobs, configure):
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env={"JOBS_CONFIG_CHECK_SECONDS": "3600"})
    wait_for_listening(process)
    from datetime import timedelta

    assert enqueue(JobSpec.now("test.record", "later").with_delay(timedelta(hours=1)))
    job = Job.objects.get(key="later")
    assert run_now([job.id]).touched == 1
    assert wait_until(lambda: Job.objects.get(pk=job.pk).state == State.DONE, 5), process.output()


def test_several_runners_all_hear_the_wake_up_but_each_job_runs_once(runjobs, configure):
    configure(poll_interval_ms=AN_HOUR_MS)
    env = {"JOBS_CONFIG_CHECK_SECONDS": "3600"}
    first, second = runjobs(env=env), runjobs(env=env)
    wait_for_listening(first)
    wait_for_listening(second)
    for n in range(30):
        assert enqueue(JobSpec.now("test.record", f"k{n}"))
    assert wait_until(lambda: Execution.objects.count() == 30, 10)
    time.sleep(0.3)  # a second runner that also claimed a row would show by now
    assert Execution.objects.count() == 30, "each job ran exactly once"
    assert Execution.objects.values("key").distinct().count() == 30


def test_the_listener_reconnects_after_losing_its_connection(runjobs, configure):
    configure(poll_interval_ms=AN_HOUR_MS)
    process = runjobs(env={"JOBS_CONFIG_CHECK_SECONDS": "3600"})
    wait_for_listening(process)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query = %s AND datname = current_database()",
            [f"LISTEN {WAKEUP_CHANNEL}"],
        )
        assert cursor.fetchone() is not None, "the listener's connection was found and cut"
    assert wait_until(lambda: "runner_listener_lost" in process.output(), 10), process.output()
    assert wait_until(lambda: process.output().count("runner_listening") >= 2, 20), process.output()
    assert enqueue(JobSpec.now("test.record", "after-reconnect"))
    assert wait_until(lambda: Execution.objects.filter(key="after-reconnect").exists(), 5), (
        process.output()
    )
