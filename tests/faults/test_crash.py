"""Runners SIGKILLed again and again while they drain a backlog.

Three `runjobs` processes share a backlog of 50,000 jobs; every second, for the
first minute, one of them is killed with SIGKILL (no handler runs, nothing
settles) and a fresh one started in its place. Attempts in flight in the dead
process keep their rows `running` until the lease expires and a survivor takes
them over. Afterwards every job is done,
and a job ran more than once only where the process running its earlier
attempt was killed before that attempt's settle landed.
"""

from __future__ import annotations

import signal
import time

import pytest
from django.db import connection

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import (
    audit,
    read_books,
    record_figures,
    settles_not_landed,
    stop,
    wait_until,
)

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

TOTAL = 50_000
#: Kills go on this long (or until the drain ends); the survivors then finish.
#: A runner takes ~1.5 s to start here, so a kill a second for the whole of
#: 50,000 jobs would measure process start-up, not the queue.
STORM_SECONDS = 60
#: A 2 s budget writes a 3 s lease: a killed runner's rows come back quickly.
ENV = {"TEST_SLEEP_LEASE": "2"}


@pytest.mark.timeout(900)
def test_runners_killed_every_second_lose_no_job_and_repeat_only_attempts_killed_before_settling(
    runjobs, configure
):
    configure(max_concurrent=16, poll_interval_ms=100, retry_base_seconds=0, retry_max_seconds=1)
    specs = [
        JobSpec.now("test.sleep", f"job-{n}").with_payload({"seconds": 0.01}).with_max_attempts(50)
        for n in range(TOTAL)
    ]
    assert all(enqueue_many(specs)), "every job is queued"
    expected = set(Job.objects.values_list("id", flat=True))
    done = Job.objects.filter(state="done")

    runners = [runjobs(env=ENV) for _ in range(3)]
    every = list(runners)
    killed: dict[int, float] = {}
    started = time.monotonic()
    give_up = started + 400
    victim = 0
    last_kill = started
    storm_ends = started + STORM_SECONDS
    while done.count() < TOTAL and time.monotonic() < min(give_up, storm_ends):
        time.sleep(1)
        if done.count() >= TOTAL:
            break
        runner = runners[victim]
        runner.process.send_signal(signal.SIGKILL)
        runner.wait(10)
        killed[runner.pid] = time.time()
        last_kill = time.monotonic()
        runners[victim] = runjobs(env=ENV)
        every.append(runners[victim])
        victim = (victim + 1) % len(runners)
    wait_until(lambda: done.count() == TOTAL, 300, "every job is done once the killing stops")
    finished = time.monotonic()
    for runner in runners:
        assert runner.process.poll() is None, (
            f"a runner that was not killed is still alive:\n{runner.output()[-2000:]}"
        )
        stop(runner)

    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.sleep"])
    logs = [runner.output() for runner in every]
    result = audit(books, expected, killed=killed, not_landed=settles_not_landed(logs))
    reran = sum(1 for runs in books.runs.values() if len(runs) > 1)
    record_figures(
        "crash (SIGKILL every second)",
        load=f"{TOTAL} jobs (10 ms each), 3 runners x 16 slots",
        faults=f"{len(killed)} runners SIGKILLed, one a second for {STORM_SECONDS} s, each "
        "replaced at once",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=result.concurrent_duplicates,
        stuck=Job.objects.filter(state="running").count(),
        jobs_run_more_than_once=reran,
        time_to_recover_seconds=round(finished - last_kill, 2),
        drain_seconds=round(finished - started, 1),
    )
    assert len(killed) >= 3, "at least three runners were killed during the drain"
    assert not result.problems, "the books balance after the kills:\n" + "\n".join(result.problems)
