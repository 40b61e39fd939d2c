"""One row locked by another session while its runner renews (issue 34, fault 1).

A runner runs eight long jobs with one-second heartbeats, a second runner
beside it; another session holds `SELECT ... FOR UPDATE` on one of the eight
running rows for longer than its lease (three heartbeats), until after its
handler has ended. Renewals used to be one UPDATE of every running row on the
runner's loop: it waited on that one row, no lease was renewed, and the second
runner took the seven others while they still ran (7 of 8 twice at once),
with nothing logged. Now the renewal skips the locked row (logged) and renews
the others; the locked row's lease runs out (logged), but no other session
can take a row while it is locked, and the first runner's settle waits for the
lock and wins. Every job runs once, and none twice at the same time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, connections, transaction

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import (
    audit,
    count_events,
    ran_twice_at_once,
    read_books,
    record_figures,
    stop,
    wait_until,
)
from tests.jobapp.models import Execution

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

JOBS = 8
HEARTBEAT = 1
#: Each job's run: longer than a lease, so a lease that is not renewed runs
#: out while the job still runs.
SECONDS = 6
#: test.sleep's budget: two minutes, far past every attempt here.
ENV = {"TEST_SLEEP_LEASE": "120"}

#: Sessions of the test database waiting for a lock (the runner's settle).
WAITING_FOR_A_LOCK_SQL = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


@contextmanager
def row_locked(key: str) -> Iterator[threading.Event]:
    """Hold `SELECT ... FOR UPDATE` on the row of `key` in a session of its own,
    as the project's code or an operator's cancel would, until the event
    yielded is set (or the block ends)."""
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Job.objects.select_for_update().filter(key=key))
                holding.set()
                release.wait(60)
        except BaseException as error:
            errors.append(error)
            holding.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold, name="row-lock")
    thread.start()
    try:
        assert holding.wait(30), "the session ran"
        assert not errors, f"the session locked the row: {errors}"
        yield release
    finally:
        release.set()
        thread.join(30)


def waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(WAITING_FOR_A_LOCK_SQL)
        return int(cursor.fetchone()[0])


@pytest.mark.timeout(180)
def test_a_row_locked_past_its_lease_holds_up_no_other_renewal_and_no_job_runs_twice_at_once(
    runjobs, configure
):
    configure(heartbeat_seconds=HEARTBEAT, poll_interval_ms=100, max_concurrent=JOBS)
    specs = [
        JobSpec.now("test.sleep", f"job-{n}").with_payload({"seconds": SECONDS})
        for n in range(JOBS)
    ]
    assert all(enqueue_many(specs)), "every job is queued"
    expected = set(Job.objects.values_list("id", flat=True))
    first = runjobs(env=ENV)
    wait_until(lambda: Execution.objects.count() == JOBS, 30, "the first runner runs all eight")
    second = runjobs(env=ENV)
    wait_until(lambda: "runner_started" in second.output(), 30, "the second runner starts")

    with row_locked("job-0") as release:
        locked_at = time.monotonic()
        wait_until(
            lambda: Execution.objects.filter(key="job-0", finished_at__isnull=False).exists(),
            30,
            "the locked row's handler ends",
        )
        # Let go once the runner's settle of that row waits for the lock (a
        # release before it would hand the row, its lease long run out, to
        # whichever claim came first).
        wait_until(lambda: waiting_for_a_lock() > 0, 30, "the runner's settle waits on the row")
        held = time.monotonic() - locked_at
        release.set()

    wait_until(lambda: Job.objects.filter(state="done").count() == JOBS, 60, "every job is done")
    statuses = [stop(runner) for runner in (first, second)]
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.sleep"])
    logs = [first.output(), second.output()]
    result = audit(books, expected)
    twice_at_once = ran_twice_at_once(books)
    executions = sum(len(runs) for runs in books.runs.values())
    skipped = [line for line in logs[0].splitlines() if " jobs job_renewal_skipped " in line]
    record_figures(
        "row lock held past the lease",
        load=f"{JOBS} jobs of {SECONDS} s, heartbeat {HEARTBEAT} s, 2 runners",
        faults=f"SELECT ... FOR UPDATE on one running row for {held:.1f} s "
        f"(its lease: {3 * HEARTBEAT} s)",
        jobs_lost=result.lost,
        concurrent_duplicates=twice_at_once,
        stuck=books.stuck,
        executions=executions,
        renewals_skipped_logged=len(skipped),
        leases_lost_logged=count_events(logs, "job_lease_lost"),
    )
    assert statuses == [0, 0], "both runners stopped cleanly"
    assert held > 3 * HEARTBEAT, f"the row was locked past its lease ({held:.1f} s)"
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
    assert twice_at_once == 0, f"{twice_at_once} jobs ran twice at the same time"
    assert executions == JOBS, "every job ran once"
    assert skipped, "the renewal skipped the locked row, and said so"
    assert all("key=job-0" in line for line in skipped), "that row alone"
