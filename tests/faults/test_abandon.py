"""`abandon` at most once per retirement, for real: against a server that ends
idle transactions, and across a crash between the retirement and the call.

Each `abandon` of these jobs (`tests.jobapp`'s `test.refuse`) appends a line to
a file outside the database before anything else (`TEST_ABANDON_LOG`): a call
whose transaction the server kills loses its database write, never its line.

- With `idle_in_transaction_session_timeout` at 1 s in the runner's sessions
  (managed PostgreSQL often sets one), an `abandon` that sleeps 2.5 s used to
  run inside the retirement's transaction: the server ended it, the
  retirement rolled back, the row was reclaimed after its lease and retired
  again, `abandon` called each time and the attempts counted past the budget,
  the job never settled. Now the retirement commits first and `abandon` runs
  after, in a transaction of its own.
- A runner SIGKILLed the moment a retirement commits, before it claims the
  `abandon` call, leaves the debt marked; two runners started together once
  the grace has passed both find it, and one calls `abandon`.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from jobs import JobSpec, retirement
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import audit, count_events, read_books, record_figures, stop, wait_until
from tests.jobapp.models import Abandonment, Execution

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

RECORDS = 100
#: The server ends a session idle in a transaction this long (ms).
IDLE_TIMEOUT_MS = 1000
#: How long each slow `abandon` sleeps: well past the timeout.
ABANDON_SECONDS = 2.5
MAX_ATTEMPTS = 3


def abandon_calls(book: Path) -> Counter[str]:
    """How many times `abandon` was called for each job id, by the file's lines."""
    if not book.exists():
        return Counter()
    return Counter(line.split()[0] for line in book.read_text().splitlines() if line.strip())


def test_a_slow_abandon_past_the_servers_idle_transaction_timeout_is_called_once_per_job(
    runjobs, configure, tmp_path
):
    configure(max_concurrent=8, poll_interval_ms=100)
    slow = {"abandon_seconds": ABANDON_SECONDS, "abandon_writes": False}
    writes = {"abandon_seconds": ABANDON_SECONDS}
    specs = [
        *(JobSpec.now("test.refuse", f"sleeps-{n}").with_payload(slow) for n in range(2)),
        *(JobSpec.now("test.refuse", f"writes-{n}").with_payload(writes) for n in range(2)),
    ]
    specs = [spec.with_max_attempts(MAX_ATTEMPTS) for spec in specs]
    records = [JobSpec.now("test.record", f"record-{n}") for n in range(RECORDS)]
    assert all(enqueue_many([*specs, *records])), "every job is queued"
    expected = set(Job.objects.values_list("id", flat=True))
    refused = {job.key: job for job in Job.objects.filter(kind="test.refuse")}
    book = tmp_path / "abandoned.txt"
    started = time.monotonic()
    runner = runjobs(
        env={
            "PGOPTIONS": f"-c idle_in_transaction_session_timeout={IDLE_TIMEOUT_MS}",
            "TEST_ABANDON_LOG": str(book),
        }
    )
    settled = Job.objects.filter(state__in=["done", "failed"])
    wait_until(
        lambda: settled.count() == RECORDS + len(refused),
        30,
        "every job settles though the server ends abandon's transactions",
    )
    wait_until(
        lambda: sum(abandon_calls(book).values()) >= len(refused),
        30,
        "every refused job's abandon is called",
    )
    took = time.monotonic() - started
    # Longer than a lease (1 s) and a slow abandon: a retirement that had rolled
    # back would have its row taken again by now and abandoned again.
    time.sleep(ABANDON_SECONDS + 2)
    output = runner.output()
    assert runner.process.poll() is None, "the runner is still running"
    assert stop(runner) == 0, "the runner stops cleanly"

    calls = abandon_calls(book)
    rows = {key: Job.objects.get(id=job.id) for key, job in refused.items()}
    for key, row in rows.items():
        assert (row.state, row.attempts) == ("failed", 1), f"{key} is retired once, at attempt 1"
        assert calls[str(row.id)] == 1, f"{key}'s abandon was called once, not {calls[str(row.id)]}"
        assert row.abandon_owed_at is None, f"{key} owes nothing"
        assert Execution.objects.filter(job_id=row.id).count() == 1, f"{key} ran once"
    assert not Job.objects.filter(state="running").exists(), "nothing is left running"
    killed_writes = [
        line
        for line in output.splitlines()
        if " jobs job_abandon_failed " in line
        and any(f"job_id={rows[f'writes-{n}'].id}" in line for n in range(2))
    ]
    assert len(killed_writes) == 2, (
        "each abandon that wrote, then idled past the timeout, lost its transaction and "
        f"was logged as failed, once:\n{output}"
    )
    assert not Abandonment.objects.filter(key__startswith="writes-").exists(), (
        "its write went with its transaction; the retirement did not"
    )
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.record", "test.refuse"])
    result = audit(
        books,
        expected,
        state=lambda job_id: "failed" if job_id in {r.id for r in rows.values()} else "done",
    )
    record_figures(
        "abandon past the idle transaction timeout",
        load=f"{RECORDS} quick jobs, 4 refused jobs (max_attempts {MAX_ATTEMPTS}), 1 runner x 8",
        faults=f"idle_in_transaction_session_timeout {IDLE_TIMEOUT_MS} ms; abandon sleeps "
        f"{ABANDON_SECONDS} s (2 of them after a write)",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=result.concurrent_duplicates,
        stuck=books.stuck,
        abandon_calls_max=max(calls.values()),
        attempts_most=max(row.attempts for row in rows.values()),
        abandon_failures_logged=count_events([output], "job_abandon_failed"),
        time_to_recover_seconds=round(took, 2),
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)


def test_a_runner_killed_between_a_retirement_and_its_abandon_leaves_a_debt_paid_once(
    runjobs, configure, tmp_path
):
    """At most once across the crash: the call is owed, not lost, and made once."""
    configure(max_concurrent=8, poll_interval_ms=100)
    specs = [
        JobSpec.now("test.refuse", f"refused-{n}").with_max_attempts(MAX_ATTEMPTS) for n in range(3)
    ]
    assert all(enqueue_many(specs)), "every job is queued"
    ids = set(Job.objects.filter(kind="test.refuse").values_list("id", flat=True))
    book = tmp_path / "abandoned.txt"
    env = {"TEST_ABANDON_LOG": str(book)}
    live = Job.objects.filter(kind="test.refuse", state__in=["queued", "running"])
    leased = Job.objects.filter(kind="test.refuse", state="running")
    killed: dict[int, float] = {}
    started = time.monotonic()
    while live.exists() and time.monotonic() - started < 60:
        wait_until(
            lambda: not leased.filter(lease_expires_at__gt=timezone.now()).exists(),
            10,
            "the dead runner's leases run out",
        )
        dying = runjobs("--burst", env={**env, "TEST_DIE_AFTER_RETIREMENT": "1"})
        status = dying.wait(30)
        if status != 0:
            killed[dying.pid] = time.time()
    assert not live.exists(), "every job is retired, one runner death at a time"
    assert killed, "a runner died at a retirement's commit"
    assert abandon_calls(book) == Counter(), "no dying runner got as far as calling abandon"
    owed = Job.objects.filter(abandon_owed_at__isnull=False)
    assert set(owed.values_list("id", flat=True)) == ids, "every retirement left its debt"

    newest = max(at for at in owed.values_list("abandon_owed_at", flat=True) if at is not None)
    wait_until(
        lambda: timezone.now() > newest + retirement.GRACE,
        retirement.GRACE.total_seconds() + 10,
        "the debts outlive the grace given to the process that retired them",
    )
    payers = [runjobs("--burst", env=env) for _ in range(2)]
    for payer in payers:
        assert payer.wait(30) == 0, f"a paying runner exits cleanly:\n{payer.output()}"
    paid_in = time.monotonic() - started

    calls = abandon_calls(book)
    assert calls == Counter({str(job_id): 1 for job_id in ids}), (
        f"each owed abandon was called once, by one of the two runners: {calls}"
    )
    assert not owed.exists(), "nothing is owed any more"
    for job in Job.objects.filter(id__in=ids):
        assert job.state == "failed"
        assert job.attempts <= MAX_ATTEMPTS + 1, "a claim past the budget at most, never a run"
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.refuse"])
    result = audit(books, ids, state="failed", killed=killed)
    record_figures(
        "runner killed between retirement and abandon",
        load="3 refused jobs, runners started one at a time, then 2 at once",
        faults=f"{len(killed)} runners SIGKILLed as a retirement committed, before its abandon",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=result.concurrent_duplicates,
        stuck=books.stuck,
        abandon_calls_max=max(calls.values()),
        time_to_recover_seconds=round(paid_in, 2),
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
