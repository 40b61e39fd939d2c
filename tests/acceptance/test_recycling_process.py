"""Recycling runner processes (`runjobs --max-jobs-per-process N`,
`--max-memory-per-process MB`), as real processes: a process over its bound
stops claiming, finishes what it holds and exits 5; a supervisor replaces it
at once, and no job runs twice for it."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

import pytest

from jobs import JobSpec, enqueue_many
from jobs.models import Job
from jobs.runner.process import EXIT_RECYCLED
from tests.conftest import RunJobs
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

ENV = {"JOBS_POLL_INTERVAL_MS": "100"}
STARTED = re.compile(r" runner_process_started index=\d+ pid=(\d+)")
RECYCLED = re.compile(
    r" runner_recycled outcome=exiting reason=\"([^\"]+)\" attempts=(\d+) rss_mb=(\S+)"
)


def stop(supervisor: RunJobs) -> int:
    supervisor.process.send_signal(signal.SIGTERM)
    return supervisor.wait(30)


def rss_mb(pid: int) -> float | None:
    """A live process's resident memory in MB, or None once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def test_max_jobs_per_process_50_under_two_processes_drains_500_jobs_each_once_recycling_as_it_goes(
    runjobs, configure
):
    configure(max_concurrent=4)
    assert all(enqueue_many([JobSpec.now("test.record", f"r-{n}") for n in range(500)]))
    supervisor = runjobs("--processes", "2", "--max-jobs-per-process", "50", env=ENV)

    wait_until(
        lambda: (
            Job.objects.filter(state="done").count() == 500 or supervisor.process.poll() is not None
        ),
        120,
        "every job is done",
    )
    assert stop(supervisor) == 0
    output = supervisor.output()

    assert Job.objects.filter(state="done").count() == 500, output[-3000:]
    runs = Counter(Execution.objects.values_list("job_id", flat=True))
    assert len(runs) == 500, "each job ran"
    assert set(runs.values()) == {1}, "each job ran once"
    per_process = Counter(Execution.objects.values_list("pid", flat=True))
    recycled = RECYCLED.findall(output)
    restarts = re.findall(
        r" runner_process_restarted .*reason=(\w+) delay_seconds=([\d.]+)", output
    )
    print(
        f"\n500 jobs in {len(per_process)} processes ({len(recycled)} recycled): "
        f"{sorted(per_process.values())} attempts each"
    )
    assert len(recycled) >= 500 // (50 + 2 * 4) - 2, "the processes were recycled as they went"
    assert all("--max-jobs-per-process 50" in reason for reason, _, _ in recycled)
    assert restarts, "recycled processes were replaced"
    assert set(restarts) == {("recycled", "0.0")}, "at once, as recycled"
    assert max(per_process.values()) <= 50 + 2 * 4, (
        "a process claims no more once 50 of its attempts have ended: it finishes at most "
        "a batch and a claim's worth more"
    )
    assert re.search(r" runner_process_exited .* status=5 ready=True ", output)
    assert "supervisor_gave_up" not in output


def test_max_memory_per_process_keeps_a_leaking_handlers_processes_bounded_by_recycling_them(
    runjobs, configure
):
    """Each attempt leaks 20 MB for good; at 200 MB a process is recycled after
    the attempt that passed it: none holds more than 200 MB and two attempts'
    leaks (that one's, and one claimed in the statement that settled it)."""
    limit, leak, jobs = 200, 20, 40
    configure(max_concurrent=1)
    assert all(
        enqueue_many(
            [JobSpec.now("test.leak", f"l-{n}").with_payload({"mb": leak}) for n in range(jobs)]
        )
    )
    supervisor = runjobs("--processes", "2", "--max-memory-per-process", str(limit), env=ENV)
    peak: dict[int, float] = {}
    done = Job.objects.filter(state="done")
    deadline = time.monotonic() + 120
    while done.count() < jobs and supervisor.process.poll() is None and time.monotonic() < deadline:
        for pid in map(int, STARTED.findall(supervisor.output())):
            if (rss := rss_mb(pid)) is not None:
                peak[pid] = max(peak.get(pid, 0.0), rss)
        time.sleep(0.05)
    assert stop(supervisor) == 0
    output = supervisor.output()

    assert done.count() == jobs, output[-3000:]
    assert Execution.objects.count() == jobs, "no attempt ran twice"
    recycled = [
        (reason, int(attempts), float(rss)) for reason, attempts, rss in RECYCLED.findall(output)
    ]
    highest = max(peak.values())
    # A fresh runner's size: a recycle's RSS less what its attempts leaked.
    baseline = min((rss - attempts * leak for _, attempts, rss in recycled), default=0.0)
    print(
        f"\n{jobs} jobs leaking {leak} MB each, --max-memory-per-process {limit}: "
        f"{len(recycled)} recycles at {[rss for _, _, rss in recycled]} MB after "
        f"{[attempts for _, attempts, _ in recycled]} attempts; the highest RSS sampled "
        f"{highest:.0f} MB over {len(peak)} processes (a fresh runner {baseline:.0f} MB; "
        f"without recycling each of the two would have grown past "
        f"{baseline + jobs // 2 * leak:.0f} MB)"
    )
    assert len(recycled) >= 2, "the leaking processes were recycled"
    assert all(rss > limit for _, _, rss in recycled), "each when over its bound"
    assert all("--max-memory-per-process 200" in reason for reason, _, _ in recycled)
    assert highest <= limit + 2 * leak + 16, (
        f"no process grew much past its bound: {highest:.0f} MB"
    )
    assert re.search(r" runner_process_restarted .* reason=recycled delay_seconds=0.0", output)


def test_a_plain_runjobs_recycles_by_finishing_its_attempts_and_exiting_5(runjobs, configure):
    """Without a supervisor, a process manager restarting on a non-zero exit
    starts the fresh process; the jobs left wait for it, queued."""
    configure(max_concurrent=1)
    assert all(enqueue_many([JobSpec.now("test.record", f"r-{n}") for n in range(20)]))
    runner = runjobs("--max-jobs-per-process", "5", env=ENV)

    assert runner.wait(60) == EXIT_RECYCLED, runner.output()

    done = Job.objects.filter(kind="test.record", state="done").count()
    assert 5 <= done <= 6, f"5 attempts, and the one claimed with the fifth's settle: {done}"
    assert Job.objects.filter(state="running").count() == 0, "it finished what it held"
    assert Job.objects.filter(kind="test.record", state="queued").count() == 20 - done
    assert 'reason="ran 5 attempts (--max-jobs-per-process 5)"' in runner.output()
    assert " runner_stopped " in runner.output(), "a clean stop: its row removed"
