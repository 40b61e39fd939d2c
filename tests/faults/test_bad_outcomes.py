"""Handlers that end badly: a `Done` whose result PostgreSQL refuses, a reason
that is not text, an exception whose message holds a NUL, a reschedule into
the past.

Each is the bad job's own end, settled and saying what was wrong; none may
fail a batch of other jobs' `Done`s (which would run them again), leave its
own row running until its lease ends, or loop.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import audit, count_events, read_books, record_figures, stop, wait_until
from tests.jobapp.bad_outcomes import BAD_OUTCOMES
from tests.jobapp.models import Execution

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

RECORDS = 400
#: Copies of each bad outcome, spread among the good jobs.
COPIES = 3
#: Those that are a `Retry`: they run on every attempt of their budget.
RETRIED = {"retry_none", "retry_int", "raise_nul", "raise_lone_surrogate"}
#: What each one's `last_error` must say.
SAYS = {
    "done_nul": "whose result contains a NUL character",
    "done_lone_surrogate": "whose result contains a lone surrogate",
    "done_not_json": "whose result is not JSON-serialisable",
    "done_too_deep": "whose result is nested more than 31 levels deep",
    "retry_none": "returned Retry without a reason",
    "failed_none": "returned Failed without a reason",
    "retry_int": "123",
    "raise_nul": "RuntimeError: a NUL \\x00 in the message",
    "raise_lone_surrogate": "RuntimeError: a lone surrogate \\udfff in the message",
    "reschedule_negative": "a reschedule's delay must be positive",
    "reschedule_zero": "a reschedule's delay must be positive",
}


def test_bad_outcomes_are_settled_as_their_own_jobs_failures_and_never_cost_a_batch(
    runjobs, configure
):
    """Short leases (3 s): a row left running would be reclaimed well within the wait."""
    configure(
        max_concurrent=16,
        poll_interval_ms=100,
        lease_seconds=2,
        heartbeat_seconds=1,
        retry_base_seconds=1,
        retry_max_seconds=1,
    )
    bad = [name for name in BAD_OUTCOMES for _ in range(COPIES)]
    step = RECORDS // len(bad)
    specs = []
    for n in range(RECORDS):
        specs.append(JobSpec.now("test.record", f"record-{n}"))
        if n % step == 0 and bad:
            name = bad.pop()
            specs.append(
                JobSpec.now("test.bad_outcome", f"{name}-{n}")
                .with_payload({"bad": name})
                .with_max_attempts(2)
            )
    assert all(enqueue_many(specs)), "every job is queued"
    jobs = {job.key: job for job in Job.objects.all()}
    good = {job.id for job in jobs.values() if job.kind == "test.record"}
    bad_jobs = {job.id: job.payload["bad"] for job in jobs.values() if job.kind != "test.record"}
    assert len(bad_jobs) == len(BAD_OUTCOMES) * COPIES

    started = time.monotonic()
    runner = runjobs()
    settled = Job.objects.filter(state__in=["done", "failed"])
    all_settled = wait_until(lambda: settled.count() == len(jobs), 40)
    took = time.monotonic() - started
    time.sleep(4)  # past a lease: a row left behind would be reclaimed and run again now
    output = runner.output()
    assert runner.process.poll() is None, "the runner is still serving"
    assert stop(runner) == 0, "the runner stops cleanly"

    runs: dict[object, list[int]] = {}
    for job_id, attempt in Execution.objects.values_list("job_id", "attempt"):
        runs.setdefault(job_id, []).append(attempt)
    rows = {job.id: job for job in Job.objects.all()}
    ran_twice = [job_id for job_id in good if runs.get(job_id) != [1]]
    assert ran_twice == [], f"{len(ran_twice)} good jobs did not run exactly once"
    left = sorted({name for job_id, name in bad_jobs.items() if rows[job_id].state != "failed"})
    assert all_settled, f"every job settles within 40 s; these bad ones did not: {left}"
    assert all(rows[job_id].state == "done" for job_id in good), "every good job is done"
    for job_id, name in bad_jobs.items():
        row = rows[job_id]
        expected_runs = [1, 2] if name in RETRIED else [1]
        assert sorted(runs.get(job_id, [])) == expected_runs, (
            f"{name} ran attempts {runs.get(job_id)}, not {expected_runs}: no loop, no rerun"
        )
        assert row.state == "failed", f"{name} is settled failed, not {row.state}"
        assert SAYS[name] in row.last_error, f"{name}'s last error says why: {row.last_error!r}"
        if name in RETRIED:
            assert row.last_error.startswith("gave up after 2 of 2 attempts"), row.last_error
        assert "never settled" not in row.last_error, f"{name} is not retired as a dead runner's"
        outcomes = [entry.outcome for entry in row.attempt_history]
        assert "reclaimed" not in outcomes, f"{name} was never taken from a live runner"
    settle_failures = count_events([output], "job_settle_failed")
    assert settle_failures == 0, "no settle failed"

    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.record", "test.bad_outcome"])
    result = audit(
        books,
        good | {job_id for job_id, name in bad_jobs.items() if name not in RETRIED},
        state=lambda job_id: "done" if job_id in good else "failed",
    )
    record_figures(
        "bad outcomes",
        load=(
            f"{RECORDS} quick jobs and {len(bad_jobs)} with bad outcomes "
            f"({len(BAD_OUTCOMES)} kinds), 1 runner x 16 slots, 3 s leases"
        ),
        faults=(
            "Done with a NUL, a lone surrogate, a set, 40-deep nesting; Retry(None), "
            "Failed(None), Retry(123); exceptions whose message has a NUL or a lone "
            "surrogate; Reschedule of -1 h and of 0"
        ),
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=result.concurrent_duplicates,
        stuck=books.stuck,
        good_jobs_run_twice=len(ran_twice),
        bad_jobs_left_running=sum(rows[job_id].state == "running" for job_id in bad_jobs),
        bad_job_executions=sum(len(runs.get(job_id, [])) for job_id in bad_jobs),
        settle_failures_logged=settle_failures,
        batch_fallbacks_logged=count_events([output], "job_batch_settle_failed"),
        time_to_settle_seconds=round(took, 2),
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
