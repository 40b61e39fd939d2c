"""Handlers that misbehave: one that hangs, one that kills its own process, and
`abandon` / `recover` hooks that are slow or raise.

None of them may stop a runner draining everybody else's work, lose a
retirement, or get `abandon` called more than once.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.db import connection

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import (
    audit,
    count_events,
    read_books,
    record_figures,
    settles_not_landed,
    stop,
    wait_until,
)
from tests.jobapp.models import Abandonment, Execution

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

RECORDS = 300


def queue(*specs: JobSpec) -> dict[str, Job]:
    assert all(enqueue_many(list(specs))), "every job is queued"
    return {job.key: job for job in Job.objects.all()}


def records(count: int = RECORDS) -> list[JobSpec]:
    return [JobSpec.now("test.record", f"record-{n}") for n in range(count)]


def test_a_hanging_handler_is_cut_off_at_its_lease_retried_and_retired_while_other_work_drains(
    runjobs, configure
):
    """A 1 s budget: the hung attempt is settled as a timed-out retry; a late result is dropped."""
    configure(max_concurrent=8, poll_interval_ms=100, retry_base_seconds=1, retry_max_seconds=1)
    jobs = queue(
        JobSpec.now("test.sleep", "hangs").with_payload({"seconds": 3600}).with_max_attempts(2),
        JobSpec.now("test.sleep", "late")
        .with_payload({"seconds": 2.5, "sleep_on": [1]})
        .with_max_attempts(3),
        *records(),
    )
    hangs, late = jobs["hangs"], jobs["late"]
    started = time.monotonic()
    runner = runjobs(env={"TEST_SLEEP_LEASE": "1"})
    settled = Job.objects.filter(state__in=["done", "failed"])
    wait_until(
        lambda: settled.count() == RECORDS + 2, 60, "every job settles though one handler hangs"
    )
    retired = time.monotonic() - started
    wait_until(
        lambda: "job_result_discarded" in runner.output(),
        10,
        "the late attempt's result arrives and is discarded",
    )
    assert runner.process.poll() is None, "the runner is still running with a thread hung"
    output = runner.output()
    stop(runner, timeout=15)

    hangs.refresh_from_db()
    late.refresh_from_db()
    assert (hangs.state, hangs.attempts) == ("failed", 2), (
        "the hung job is timed out on both its attempts and retired"
    )
    assert "timed out after 1s" in hangs.last_error, "its last error says it timed out"
    assert Abandonment.objects.filter(job_id=hangs.id).count() == 1, "abandon is called once"
    assert not Execution.objects.filter(job_id=hangs.id, finished_at__isnull=False).exists(), (
        "the hung handler never returned"
    )
    assert (late.state, late.attempts) == ("done", 2), (
        "the late job is retried after its timeout and done by attempt 2"
    )
    first = Execution.objects.get(job_id=late.id, attempt=1)
    assert first.finished_at is not None, "attempt 1 did return, after its budget"
    assert f"job_id={late.id}" in output.split("job_result_discarded", 1)[1].splitlines()[0], (
        "the result discarded is the late job's"
    )
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.record", "test.sleep"])
    result = audit(
        books,
        {job.id for job in jobs.values()},
        state=lambda job_id: "failed" if job_id == hangs.id else "done",
        not_landed=settles_not_landed([output]),
    )
    record_figures(
        "hanging handler",
        load=f"{RECORDS} quick jobs, 1 hanging (1 h), 1 late (2.5 s), 1 runner x 8 slots",
        faults="handler blocks far past its 1 s lease",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        timeouts_logged=count_events([output], "job_timed_out"),
        results_discarded=count_events([output], "job_result_discarded"),
        time_to_recover_seconds=round(retired, 2),
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)


def test_a_poison_job_that_kills_its_runner_spends_its_attempts_and_is_retired_with_one_abandon(
    runjobs, configure
):
    """Each death costs an attempt (counted at claim); the claim past the budget retires it."""
    configure(poll_interval_ms=100)
    job = queue(JobSpec.now("test.poison", "poison").with_max_attempts(3))["poison"]
    started = time.monotonic()
    deaths = bursts = 0
    outputs = []
    while time.monotonic() - started < 90:
        job.refresh_from_db()
        if job.state == "failed":
            break
        lease = job.lease_expires_at
        if lease is not None:

            def lease_expired(lease: datetime = lease) -> bool:
                return time.time() > lease.timestamp() + 0.2

            wait_until(
                lease_expired,
                10,
                "the dead runner's lease expires",
            )
        process = runjobs("--burst")
        status = process.wait(30)
        outputs.append(process.output())
        bursts += 1
        if status != 0:
            deaths += 1
    retired = time.monotonic() - started
    again = runjobs("--burst")
    assert again.wait(30) == 0, f"a burst after the retirement exits 0:\n{again.output()}"

    job.refresh_from_db()
    runs = list(Execution.objects.filter(job_id=job.id).order_by("attempt"))
    record_figures(
        "poison job",
        load="1 job that calls os._exit(1), max_attempts 3, 1 s lease",
        faults=f"{deaths} runner deaths, {bursts} bursts",
        jobs_lost=0 if job.state == "failed" else 1,
        completed_attempts_repeated=0,
        unexplained_repeats=0,
        abandon_calls=Abandonment.objects.filter(job_id=job.id).count(),
        time_to_recover_seconds=round(retired, 2),
    )
    assert deaths == 3, f"the poison job killed its runner once per attempt, not {deaths} times"
    assert job.state == "failed", "the poison job is retired"
    assert [run.attempt for run in runs] == [1, 2, 3], "each of its three attempts ran once"
    assert job.attempts == 4, "the fourth claim found the budget spent and retired it unrun"
    assert "attempts exhausted" in job.last_error, "its last error says its attempts ran out"
    assert Abandonment.objects.filter(job_id=job.id).count() == 1, (
        "abandon is called exactly once, by the runner that retired it"
    )


def test_a_slow_or_raising_abandon_is_logged_and_its_retirement_commits_exactly_once(
    runjobs, configure
):
    """Two runners; a 3 s abandon outlives the 1 s lease and no other runner takes the row."""
    configure(max_concurrent=8, poll_interval_ms=100)
    jobs = queue(
        JobSpec.now("test.refuse", "slow").with_payload({"abandon_seconds": 3}),
        JobSpec.now("test.refuse", "raises").with_payload({"abandon": "raise"}),
        *records(),
    )
    started = time.monotonic()
    runners = [runjobs() for _ in range(2)]
    settled = Job.objects.filter(state__in=["done", "failed"])
    wait_until(lambda: settled.count() == RECORDS + 2, 60, "every job settles")
    took = time.monotonic() - started
    time.sleep(2)  # the slow abandon's row had a 2 s lease: let another runner look at it
    logs = [runner.output() for runner in runners]
    for runner in runners:
        assert runner.process.poll() is None, "a misbehaving abandon never crashes a runner"
        assert stop(runner) == 0, "the runner stops cleanly"

    slow, raises = Job.objects.get(key="slow"), Job.objects.get(key="raises")
    assert (slow.state, slow.attempts) == ("failed", 1), "the slow abandon's job is retired once"
    assert Abandonment.objects.filter(job_id=slow.id).count() == 1, (
        "the slow abandon ran once and its write committed, after the retirement"
    )
    assert (raises.state, raises.attempts) == ("failed", 1), (
        "the raising abandon's job is retired all the same"
    )
    assert raises.last_error == "refused on purpose", "the retirement keeps the handler's reason"
    failed_lines = [
        line for log in logs for line in log.splitlines() if " jobs job_abandon_failed " in line
    ]
    assert len(failed_lines) == 1, f"the raising abandon is logged once, not {len(failed_lines)}"
    assert f"job_id={raises.id}" in failed_lines[0], "the log line names the job"
    assert not Abandonment.objects.filter(job_id=raises.id).exists(), (
        "the raising abandon's own writes are rolled back"
    )
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.record", "test.refuse"])
    result = audit(
        books,
        {job.id for job in jobs.values()},
        state=lambda job_id: "failed" if job_id in (slow.id, raises.id) else "done",
    )
    record_figures(
        "slow and raising abandon",
        load=f"{RECORDS} quick jobs, 2 refused jobs, 2 runners x 8 slots",
        faults="abandon sleeps 3 s (past a 1 s lease); abandon raises",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        abandon_failures_logged=len(failed_lines),
        time_to_recover_seconds=round(took, 2),
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)


def test_a_raising_recover_is_logged_and_the_runner_drains_anyway(runjobs, configure):
    configure(max_concurrent=8, poll_interval_ms=100)
    jobs = queue(*records())
    started = time.monotonic()
    runner = runjobs(env={"TEST_RECOVER_RAISES": "1"})
    done = Job.objects.filter(state="done")
    wait_until(lambda: done.count() == RECORDS, 60, "every job is done")
    took = time.monotonic() - started
    output = runner.output()
    assert runner.process.poll() is None, "a raising recover never crashes the runner"
    assert stop(runner) == 0, "the runner stops cleanly"
    failed = [line for line in output.splitlines() if " jobs job_recover_failed " in line]
    assert len(failed) == 1, f"the raising recover is logged once at start-up:\n{output}"
    assert "kind=test.refuse" in failed[0], "the log line names the handler's kind"
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.record"])
    result = audit(books, {job.id for job in jobs.values()})
    record_figures(
        "raising recover",
        load=f"{RECORDS} quick jobs, 1 runner",
        faults="one handler's recover raises at start-up",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        time_to_recover_seconds=round(took, 2),
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
