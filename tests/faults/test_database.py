"""The database goes away: restarted mid-drain, or not up yet when runners start.

Both run on the private cluster (127.0.0.1:5433), the only one these tests may
restart or stop. A runner that loses the database logs it, backs off, reconnects
and finishes; one that starts before the database waits with a clear log line
instead of exiting with a traceback.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import psycopg
import pytest

from tests.conftest import RunJobs
from tests.faults.books import (
    attempts_retried,
    audit,
    count_events,
    read_books,
    record_figures,
    settles_not_landed,
    stop,
    wait_until,
)
from tests.faults.conftest import PrivateCluster

pytestmark = pytest.mark.postgresql

#: Short leases and immediate retries, so attempts cut off by the outage come
#: back within seconds; a short poll, so a runner notices promptly.
ENV = {
    "TEST_SLEEP_LEASE": "2",
    "JOBS_MAX_CONCURRENT": "8",
    "JOBS_POLL_INTERVAL_MS": "200",
    "JOBS_RETRY_BASE_SECONDS": "0",
    "JOBS_RETRY_MAX_SECONDS": "1",
    "JOBS_MAX_ATTEMPTS": "25",
}


def enqueue_on(
    cluster: PrivateCluster, count: int, kind: str, payload: dict[str, object]
) -> set[uuid.UUID]:
    return cluster.enqueue_many(count, kind, payload, env=ENV, max_attempts=25)


def done_count(cluster, kind: str) -> int:
    try:
        return int(
            cluster.query(
                "SELECT count(*) FROM jobs_job WHERE kind = %s AND state = 'done'", [kind]
            )[0][0]
        )
    except psycopg.Error:
        return -1  # the database is restarting


def books_of(cluster, kinds):
    with cluster.connect() as conn, conn.cursor() as cursor:
        return read_books(cursor, kinds)


#: The restart storm's backlog, and the share of it done before each restart.
RESTART_STORM_JOBS = 50_000
RESTART_AT = (0.2, 0.4, 0.6, 0.8)


@pytest.mark.timeout(600)
def test_database_restarts_mid_drain_lose_no_job_and_apply_no_settle_twice(
    cluster, private_runjobs
):
    """Runners log each outage, back off, reconnect (LISTEN included) and finish the drain."""
    total = RESTART_STORM_JOBS
    expected = enqueue_on(cluster, total, "test.sleep", {"seconds": 0.01})
    runners = [private_runjobs(env=ENV) for _ in range(2)]
    started = time.monotonic()
    restarts: list[float] = []
    recoveries: list[float] = []

    def done_at_least(count: float) -> Callable[[], bool]:
        return lambda: done_count(cluster, "test.sleep") >= count

    for share in RESTART_AT:
        wait_until(
            done_at_least(total * share),
            240,
            f"{share:.0%} of the jobs are done before the next restart",
        )
        done_before = done_count(cluster, "test.sleep")
        restart_at = time.monotonic()
        cluster.restart()
        restarts.append(time.monotonic() - restart_at)
        wait_until(done_at_least(done_before + 1), 60, "jobs complete again after the restart")
        recoveries.append(time.monotonic() - restart_at)
    wait_until(
        lambda: done_count(cluster, "test.sleep") == total,
        240,
        "every job is done after the restarts",
    )
    drained = time.monotonic() - started
    for runner in runners:

        def listening_again(runner: RunJobs = runner) -> bool:
            return runner.output().count("runner_listening") >= 1 + len(RESTART_AT)

        wait_until(
            listening_again,
            20,
            "each runner's LISTEN connection comes back after the restart",
        )
    logs = [runner.output() for runner in runners]
    for runner in runners:
        assert runner.process.poll() is None, (
            f"a runner survives the database restart:\n{runner.output()[-3000:]}"
        )
        assert stop(runner) == 0, "a runner stops cleanly after the drain"

    books = books_of(cluster, ["test.sleep"])
    # A handler whose own write failed in an outage raised: its attempt is
    # retried (the settle tried until the database answered), not lost.
    ended = settles_not_landed(logs) | attempts_retried(logs)
    result = audit(books, expected, not_landed=ended)
    outage_lines = sum(
        count_events(logs, name)
        for name in ("runner_database_error", "job_settle_failed", "runner_listener_lost")
    )
    record_figures(
        "database restart",
        load=f"{total} jobs (10 ms each), 2 runners x 8 slots",
        faults=f"private cluster restarted {len(RESTART_AT)} times mid-drain (fast shutdown)",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        concurrent_duplicates=result.concurrent_duplicates,
        stuck=len(cluster.query("SELECT 1 FROM jobs_job WHERE state = 'running'")),
        restart_seconds=[round(seconds, 2) for seconds in restarts],
        time_to_recover_seconds=round(max(recoveries), 2),
        drain_seconds=round(drained, 1),
        outage_log_lines=outage_lines,
        listening_logged=[log.count("runner_listening") for log in logs],
    )
    assert outage_lines > 0, "the runners log the outage"
    assert all(log.count("runner_listener_lost") >= 1 for log in logs), (
        "each runner logs that its LISTEN connection was lost"
    )
    assert not result.problems, "the books balance after a restart:\n" + "\n".join(result.problems)


def test_a_runner_started_before_its_database_waits_with_a_clear_log_line_then_drains(
    cluster, private_runjobs
):
    """No traceback and no exit: `runner_database_unavailable`, retried, then the work."""
    total = 200
    expected = enqueue_on(cluster, total, "test.record", {})
    cluster.stop()
    try:
        runner = private_runjobs(env=ENV)
        wait_until(
            lambda: (
                runner.output().count("runner_database_unavailable") >= 3
                or runner.process.poll() is not None
            ),
            30,
            "the runner logs that the database is unavailable, three times",
        )
        assert runner.process.poll() is None, (
            f"a runner whose database is down keeps waiting rather than exiting:\n{runner.output()}"
        )
        waited = runner.output().count("runner_database_unavailable")
    finally:
        up_at = time.monotonic()
        cluster.start()
    wait_until(
        lambda: done_count(cluster, "test.record") == total,
        60,
        "the runner drains once the database is up",
    )
    recovered = time.monotonic() - up_at
    output = runner.output()
    assert stop(runner) == 0, "the runner stops cleanly after the drain"
    books = books_of(cluster, ["test.record"])
    result = audit(books, expected)
    record_figures(
        "database unreachable at start",
        load=f"{total} jobs, 1 runner",
        faults="runner started with the private cluster stopped",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        unavailable_log_lines=waited,
        time_to_recover_seconds=round(recovered, 2),
    )
    assert "Traceback" not in output, f"waiting for the database prints no traceback:\n{output}"
    assert "retry_in_seconds=" in output, "the log line says when the runner tries again"
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
