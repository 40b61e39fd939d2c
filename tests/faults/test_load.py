"""Under load: a graceful shutdown with every slot busy, and a long drain's memory."""

from __future__ import annotations

import os
import signal
import time

import pytest

from jobs import JobSpec
from jobs.models import Job, RunnerProcess
from jobs.queue import enqueue_many
from tests.faults.books import audit, read_books, record_figures, rss_kib, stop, wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.postgresql


@pytest.mark.django_db(transaction=True)
def test_sigterm_with_eight_attempts_running_lets_all_eight_finish_and_exits_within_the_grace(
    runjobs, configure
):
    configure(max_concurrent=8, poll_interval_ms=100)
    busy = [JobSpec.now("test.sleep", f"busy-{n}").with_payload({"seconds": 2}) for n in range(8)]
    waiting = [
        JobSpec.now("test.sleep", f"waiting-{n}").with_payload({"seconds": 2}) for n in range(20)
    ]
    assert all(enqueue_many(busy)), "the eight busy jobs are queued"
    runner = runjobs("--grace", "10", env={"TEST_SLEEP_LEASE": "30"})
    wait_until(
        lambda: Execution.objects.count() >= 8, 30, "eight attempts are running in the handler"
    )
    assert all(enqueue_many(waiting)), "twenty more jobs are queued behind them"
    signalled = time.monotonic()
    os.kill(runner.pid, signal.SIGTERM)
    status = runner.wait(20)
    took = time.monotonic() - signalled

    busy_rows = Job.objects.filter(key__startswith="busy-")
    record_figures(
        "graceful shutdown under load",
        load="8 attempts of 2 s running, 20 queued behind them, 1 runner x 8 slots",
        faults="SIGTERM with every slot busy, --grace 10",
        jobs_lost=8 - busy_rows.filter(state="done").count(),
        completed_attempts_repeated=0,
        unexplained_repeats=0,
        exit_status=status,
        time_to_recover_seconds=round(took, 2),
    )
    assert status == 0, f"the runner exits 0 after its attempts finish:\n{runner.output()}"
    assert took < 10, f"the runner exits within its 10 s grace, not after {took:.1f}s"
    assert busy_rows.filter(state="done", attempts=1).count() == 8, (
        "all eight running attempts finished and their results are stored"
    )
    assert Execution.objects.filter(finished_at__isnull=False).count() == 8, (
        "exactly the eight attempts ran, each to its end"
    )
    assert not Job.objects.filter(state="running").exists(), "nothing is left running"
    assert (
        Job.objects.filter(key__startswith="waiting-", state="queued", attempts=0).count() == 20
    ), "nothing new is claimed after the signal"
    assert not RunnerProcess.objects.exists(), "the runner removes its presence row on the way out"


TOTAL = 100_000
WARM_UP = 5_000
#: How much the runner's resident memory may grow from warm-up to the end. Flat
#: measures well under 1 MB; the DEBUG query log this caught grew it ~22 MB.
GROWTH_BOUND_KIB = 10 * 1024


@pytest.mark.timeout(600)
def test_a_hundred_thousand_job_drain_keeps_the_runners_memory_flat(cluster, private_runjobs):
    """On the private cluster, which nobody else loads, with the project's default DEBUG."""
    cluster.manage(
        "shell",
        "-c",
        "from jobs import JobSpec; from jobs.queue import enqueue_many\n"
        f"for s in range(0, {TOTAL}, 10_000):\n"
        "    enqueue_many([JobSpec.now('test.noop', f'noop-{n}') for n in range(s, s + 10_000)])",
    )
    expected = {row[0] for row in cluster.query("SELECT id FROM jobs_job WHERE kind = 'test.noop'")}
    assert len(expected) == TOTAL, "every job is queued"

    def done() -> int:
        # Of the queued kind only: the built-in sweep schedule's occurrence may
        # fire during the drain and settle done beside them.
        return int(
            cluster.query(
                "SELECT count(*) FROM jobs_job WHERE kind = 'test.noop' AND state = 'done'"
            )[0][0]
        )

    runner = private_runjobs(env={"JOBS_MAX_CONCURRENT": "64", "JOBS_POLL_INTERVAL_MS": "100"})
    wait_until(lambda: done() >= WARM_UP, 120, f"{WARM_UP} jobs are done (warm-up)")
    warm = time.monotonic()
    start_rss = rss_kib(runner.pid)
    samples = [start_rss]
    give_up = warm + 400
    while done() < TOTAL and time.monotonic() < give_up:
        time.sleep(1)
        samples.append(rss_kib(runner.pid))
    drained = time.monotonic() - warm
    assert done() == TOTAL, f"every job is done within {give_up - warm:.0f}s"
    end_rss = rss_kib(runner.pid)
    peak = rss_kib(runner.pid, "VmHWM")
    stop(runner)
    print(
        f"\nrunner RSS: {start_rss / 1024:.1f} MB after {WARM_UP} jobs, "
        f"{end_rss / 1024:.1f} MB after {TOTAL} (peak {peak / 1024:.1f} MB)"
    )
    with cluster.connect() as conn, conn.cursor() as cursor:
        books = read_books(cursor, ["test.noop"])
    result = audit(books, expected)
    record_figures(
        "memory (100,000-job drain)",
        load=f"{TOTAL} no-op jobs, 1 runner x 64 slots",
        faults="none: a long drain (DEBUG on, the project's default)",
        jobs_lost=result.lost,
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        rss_start_mb=round(start_rss / 1024, 1),
        rss_end_mb=round(end_rss / 1024, 1),
        rss_peak_mb=round(peak / 1024, 1),
        rss_max_sampled_mb=round(max(samples) / 1024, 1),
        growth_bound_mb=GROWTH_BOUND_KIB // 1024,
        jobs_per_second=round((TOTAL - WARM_UP) / drained),
        time_to_recover_seconds=None,
    )
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
    assert end_rss - start_rss <= GROWTH_BOUND_KIB, (
        f"the runner's memory stays flat: it grew {(end_rss - start_rss) / 1024:.1f} MB "
        f"from {start_rss / 1024:.1f} MB, more than {GROWTH_BOUND_KIB // 1024} MB"
    )
