"""A `runjobs` process killed mid-attempt (SIGKILL: the OOM killer, a lost machine).

Nothing runs in the dying process, so nothing is settled: the row stays
`running` under the lease its claim wrote. Once that lease expires the next
runner takes the row over, counting the lost attempt, and either runs it again
or, with the budget spent, retires it and calls `abandon` exactly once. Until
the lease expires nobody may take the row: the runner that holds it might
still be alive.
"""

from __future__ import annotations

import signal
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import JobSpec, enqueue
from jobs.history import Outcome
from jobs.holding import RUNNER_GONE, Holders
from jobs.models import Job, RunnerProcess
from jobs.stats import collect
from tests.acceptance import wait_for_attempt
from tests.helpers import wait_until
from tests.jobapp.models import Abandonment, Execution

pytestmark = pytest.mark.django_db(transaction=True)

#: test.sleep's budget is 2 s, so its written lease is 3 s: short enough to
#: wait out. The first attempt sleeps far past it and is killed well before the
#: runner's own 2 s timeout would settle it; later attempts do not sleep.
SHORT_LEASE = {"TEST_SLEEP_LEASE": "2"}
#: A lease that outlives the test.
LONG_LEASE = {"TEST_SLEEP_LEASE": "30"}
SLEEPS_ON_FIRST_ATTEMPT = {"seconds": 30, "sleep_on": [1]}


def kill_mid_attempt(runjobs, spec: JobSpec, env: dict[str, str]):
    """Queue `spec`, start a runner, SIGKILL it once attempt 1 is in the handler; the
    row and the dead process."""
    assert enqueue(spec)
    job = Job.objects.get(kind=spec.kind, key=spec.key)
    process = runjobs(env=env)
    wait_for_attempt(job, 1, process)
    process.process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=10) == -signal.SIGKILL, "the runner died of SIGKILL"
    job.refresh_from_db()
    assert (job.state, job.attempts) == ("running", 1), (
        "a runner killed mid-attempt leaves its row running, with the attempt counted"
    )
    assert Execution.objects.get(job_id=job.id).finished_at is None, (
        "the first attempt never finished"
    )
    assert job.claimed_by == runner_name(process), "the row names the runner that claimed it"
    return job, process


def runner_name(process) -> str:
    """The name a one-lane `runjobs` process gives itself (and its claims)."""
    return f"{socket.gethostname()}:{process.process.pid}"


def wait_out_the_lease(job: Job) -> None:
    assert job.lease_expires_at is not None, "a running row has a lease"
    lease = job.lease_expires_at
    assert lease - timezone.now() < timedelta(seconds=5), "the lease is short enough to wait out"
    wait_until(
        lambda: timezone.now() > lease + timedelta(milliseconds=100),
        10,
        "the killed runner's lease expires",
    )


def test_after_a_killed_runners_lease_expires_the_next_runner_reclaims_and_completes_the_job(
    runjobs,
):
    """The crash costs an attempt and a lease's wait, never the job."""
    spec = JobSpec.now("test.sleep", "crashed").with_payload(SLEEPS_ON_FIRST_ATTEMPT)
    job, first = kill_mid_attempt(runjobs, spec, SHORT_LEASE)
    wait_out_the_lease(job)

    process = runjobs("--burst", env=SHORT_LEASE)
    assert process.wait(timeout=15) == 0, process.output()

    job.refresh_from_db()
    assert (job.state, job.attempts) == ("done", 2), (
        "the next runner takes the row over as attempt 2 and completes it"
    )
    assert job.claimed_by == runner_name(process), "the row names the runner that took it over"
    [lost] = job.attempt_history
    assert (lost.attempt, lost.outcome, lost.runner) == (
        1,
        Outcome.RECLAIMED,
        runner_name(first),
    ), "the lost attempt is on the record, with the runner that vanished"
    assert f"lease expired on runner {runner_name(first)}" in lost.error
    executions = list(Execution.objects.filter(job_id=job.id).order_by("attempt"))
    assert [e.attempt for e in executions] == [1, 2], "attempt 1 ran, then attempt 2"
    assert executions[0].finished_at is None, "the killed attempt never finished"
    assert executions[1].finished_at is not None, "the reclaimed attempt ran to its end"
    assert "job_reclaimed" in process.output(), (
        "the runner logs that it took over a row whose runner vanished"
    )


def test_a_killed_last_attempt_is_retired_after_its_lease_and_abandon_runs_exactly_once(runjobs):
    """With the budget spent, the takeover retires the row without running it again."""
    spec = (
        JobSpec.now("test.sleep", "last-chance")
        .with_payload(SLEEPS_ON_FIRST_ATTEMPT)
        .with_max_attempts(1)
    )
    job, first = kill_mid_attempt(runjobs, spec, SHORT_LEASE)
    wait_out_the_lease(job)

    second = runjobs("--burst", env=SHORT_LEASE)
    assert second.wait(timeout=15) == 0, second.output()

    job.refresh_from_db()
    assert job.state == "failed", "a row whose only attempt died is retired as failed"
    assert [(e.attempt, e.outcome, e.runner) for e in job.attempt_history] == [
        (1, Outcome.RECLAIMED, runner_name(first)),
        (2, Outcome.FAILED, runner_name(second)),
    ], "the record has the lost attempt, then the takeover that retired it unrun"
    assert Execution.objects.filter(job_id=job.id).count() == 1, (
        "a job with its attempts spent is never run again"
    )
    assert Abandonment.objects.filter(job_id=job.id).count() == 1, (
        "retiring the row calls abandon once"
    )

    third = runjobs("--burst", env=SHORT_LEASE)
    assert third.wait(timeout=15) == 0, third.output()

    job.refresh_from_db()
    assert job.state == "failed", "a retired row stays failed"
    assert Abandonment.objects.filter(job_id=job.id).count() == 1, (
        "abandon is the terminal notice: a later runner never calls it again"
    )
    assert Execution.objects.filter(job_id=job.id).count() == 1, "nor runs the job again"


def test_a_runner_does_not_take_a_row_whose_lease_is_still_live(runjobs):
    """A live lease may belong to a runner that is only slow: taking it would run the job twice."""
    spec = JobSpec.now("test.sleep", "held").with_payload(SLEEPS_ON_FIRST_ATTEMPT)
    job, _ = kill_mid_attempt(runjobs, spec, LONG_LEASE)
    assert job.lease_expires_at is not None
    assert job.lease_expires_at > timezone.now() + timedelta(seconds=20), "the lease is live"

    process = runjobs("--burst", env=LONG_LEASE)
    assert process.wait(timeout=15) == 0, (
        f"a burst with only a leased row to look at exits 0:\n{process.output()}"
    )

    job.refresh_from_db()
    assert (job.state, job.attempts) == ("running", 1), (
        "a runner leaves a row with a live lease alone"
    )
    assert Execution.objects.filter(job_id=job.id).count() == 1, "and does not run it"
    assert "job_reclaimed" not in process.output(), "nothing was taken over"


def test_a_killed_runners_job_shows_runner_gone_once_its_heartbeat_is_stale_before_its_lease_ends(
    runjobs,
):
    """Judged at the instant the gone threshold has passed (the dead process beats no more,
    so its last heartbeat is what a later look finds): stuck, though the lease still runs."""
    spec = JobSpec.now("test.sleep", "orphaned").with_payload(SLEEPS_ON_FIRST_ATTEMPT)
    job, dead = kill_mid_attempt(runjobs, spec, LONG_LEASE)
    assert RunnerProcess.objects.filter(pid=dead.process.pid).exists(), "its row outlived it"
    assert Holders.read().stuck(job) == "", "within the gone threshold it may only be slow"

    later = timezone.now() + RunnerProcess.STALE_AFTER + timedelta(seconds=1)
    assert job.lease_expires_at is not None
    assert job.lease_expires_at > later, "the lease runs on"
    assert Holders.read(now=later).stuck(job) == RUNNER_GONE
    # The dead runner may also have held the retention sweep it queued at start-up
    # (claimed beside the job, or not yet settled when the signal came): every row
    # it held is stuck, and none of them counts as running.
    held = Job.objects.filter(state="running", claimed_by=runner_name(dead)).count()
    assert held >= 1
    stats = collect(now=later)
    assert (stats.stuck, stats.healthy_running) == (held, 0), (
        "the dashboard counts what the dead runner held as stuck, not running"
    )
