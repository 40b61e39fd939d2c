"""The live config: each key reaches a running runner at its own grain, without a restart.

These drive a real runner on a thread against the real config row; changes are
made the way another process would make them (a queryset update, which rings
no doorbell here), unless the test is about a save in the runner's own process.
Across processes (another process's enqueue, SIGHUP to `runjobs`) it is
tests/acceptance/test_config_process.py.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import Done, JobHandler, JobSpec, Retry, enqueue
from jobs.models import Job, JobsConfig, State
from jobs.registry import Registry
from jobs.sweep import KIND as SWEEP_KIND
from jobs.sweep import SweepHandler
from jobs.wakeup import wake_runners
from tests.factories import add_ready_job, set_row
from tests.helpers import running, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Gate:
    """Handlers that block until released, counting how many run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.running = 0
        self.peak = 0
        self.started = 0

    def enter(self) -> None:
        with self.lock:
            self.running += 1
            self.started += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


def gated_registry(gate: Gate, outcome: object = None) -> Registry:
    registry = Registry()

    class Blocking(JobHandler):
        kind = "test.gated"

        def run(self, job: Job) -> object:
            gate.enter()
            try:
                gate.release.wait(20)
            finally:
                gate.leave()
            return outcome or Done()

    registry.register(Blocking)
    return registry


def recording_registry(started: threading.Event) -> Registry:
    registry = Registry()

    class Quick(JobHandler):
        kind = "test.quick"

        def run(self, job: Job) -> Done:
            started.set()
            return Done()

    registry.register(Quick)
    return registry


def test_a_lowered_poll_interval_applies_without_one_last_sleep(make_runner, configure):
    """An operator lowers the interval because something is waiting now: the runner
    must not finish a minute-long sleep at the old value first."""
    configure(poll_interval_ms=60_000)
    started = threading.Event()
    runner = make_runner(registry=recording_registry(started))
    with running(runner):
        assert wait_until(lambda: runner.passes >= 1, 5), "the runner looked once and went idle"
        add_ready_job("test.quick", "scheduled")
        set_row(poll_interval_ms=50)
        assert started.wait(5), "the new poll interval cut the minute-long sleep short"


def test_a_saved_change_reaches_a_running_runner_within_one_poll_interval_without_a_signal(
    make_runner, configure
):
    configure(poll_interval_ms=300, max_concurrent=1)
    gate = Gate()
    runner = make_runner(registry=gated_registry(gate))
    for n in range(3):
        add_ready_job("test.gated", f"k{n}")
    with running(runner):
        assert wait_until(lambda: gate.running == 1), "one attempt runs at max_concurrent=1"
        set_row(max_concurrent=3)
        assert wait_until(lambda: gate.running == 3, 2), "the change arrived without a signal"
        gate.release.set()


def test_raising_max_concurrent_widens_the_pool_immediately(make_runner, configure):
    configure(poll_interval_ms=60_000, max_concurrent=2)
    gate = Gate()
    runner = make_runner(registry=gated_registry(gate))
    for n in range(6):
        add_ready_job("test.gated", f"k{n}")
    with running(runner):
        assert wait_until(lambda: gate.running == 2)
        row = JobsConfig.load()
        row.max_concurrent = 5
        row.save()  # a save in the runner's own process rings its doorbell
        assert wait_until(lambda: gate.running == 5, 0.5), "raising the limit widened the pool"
        gate.release.set()
        assert wait_until(lambda: Job.objects.filter(state=State.DONE).count() == 6)


def test_lowering_max_concurrent_cancels_nothing_and_converges_as_attempts_finish(
    make_runner, configure
):
    configure(poll_interval_ms=50, max_concurrent=3)
    gate = Gate()
    runner = make_runner(registry=gated_registry(gate))
    for n in range(6):
        add_ready_job("test.gated", f"k{n}")
    with running(runner):
        assert wait_until(lambda: gate.running == 3)
        set_row(max_concurrent=1)
        assert wait_until(
            lambda: len(runner.in_flight()) == 3 and runner._current.max_concurrent == 1
        )
        assert gate.running == 3, "nothing in flight was cancelled to reach the new number"
        assert gate.started == 3, "no new attempt started while over the new limit"
        gate.peak = 0
        gate.release.set()
        assert wait_until(lambda: Job.objects.filter(state=State.DONE).count() == 6)
    assert gate.started == 6
    assert gate.peak <= 3


def test_max_attempts_is_frozen_at_enqueue_so_a_change_reaches_new_work_but_not_the_backlog(
    configure,
):
    configure(max_attempts=5)
    assert enqueue(JobSpec.now("test.record", "before"))
    set_row(max_attempts=9)
    assert enqueue(JobSpec.now("test.record", "after"))
    budgets = dict(Job.objects.values_list("key", "max_attempts"))
    assert budgets == {"before": 5, "after": 9}, (
        "the backlog keeps its budget; new work takes the new one"
    )


def test_a_running_attempt_keeps_the_lease_and_backoff_it_was_claimed_under(make_runner, configure):
    configure(poll_interval_ms=50, lease_seconds=300, retry_base_seconds=10, retry_max_seconds=10)
    gate = Gate()
    runner = make_runner(registry=gated_registry(gate, outcome=Retry("again")))
    job = add_ready_job("test.gated", "long")
    with running(runner):
        assert wait_until(lambda: gate.running == 1)
        lease_before = Job.objects.get(pk=job.pk).lease_expires_at
        set_row(lease_seconds=5, retry_base_seconds=1000, retry_max_seconds=1000)
        assert wait_until(lambda: runner._current.lease_seconds == 5)
        assert Job.objects.get(pk=job.pk).lease_expires_at == lease_before, (
            "a reload never moves the lease of an attempt already running"
        )
        finished_at = timezone.now()
        gate.release.set()
        assert wait_until(lambda: Job.objects.get(pk=job.pk).state == State.QUEUED)
    retried = Job.objects.get(pk=job.pk)
    delay = (retried.run_at - finished_at).total_seconds()
    assert 9 <= delay <= 12, (
        f"the retry used the backoff it was claimed under (10 s), not 1000 s: {delay}"
    )


def test_lease_and_retry_changes_reach_the_next_claim(make_runner, configure):
    configure(poll_interval_ms=50, lease_seconds=300)
    gate = Gate()
    runner = make_runner(registry=gated_registry(gate))
    job = add_ready_job("test.gated", "next")
    set_row(lease_seconds=20)
    with running(runner):
        assert wait_until(lambda: gate.running == 1)
        claimed = Job.objects.get(pk=job.pk)
        assert claimed.lease_expires_at is not None
        held = (claimed.lease_expires_at - claimed.updated_at).total_seconds()
        assert 20 <= held <= 23, f"the next claim wrote the new 20 s budget plus a margin: {held}"
        gate.release.set()


def sweep_registry() -> Registry:
    registry = Registry()
    registry.register(SweepHandler)
    return registry


def live_sweeps() -> int:
    return Job.objects.filter(kind=SWEEP_KIND, state__in=["queued", "running"]).count()


def test_retention_zero_schedules_no_sweep_at_start_up(make_runner, configure):
    configure(retention_days=0, poll_interval_ms=50)
    runner = make_runner(registry=sweep_registry())
    runner.drain()
    assert not Job.objects.filter(kind=SWEEP_KIND).exists(), "retention 0 keeps everything"


def test_retention_set_to_zero_stops_the_sweep_at_its_next_pass(make_runner, configure):
    configure(retention_days=7, poll_interval_ms=50)
    runner = make_runner(registry=sweep_registry())
    with running(runner):
        assert wait_until(lambda: live_sweeps() == 1)
        sweep = Job.objects.get(kind=SWEEP_KIND)
        assert sweep.state == State.QUEUED, "the sweep is scheduled while retention is on"
        set_row(retention_days=0)
        assert wait_until(lambda: runner._current.retention_days == 0)
        Job.objects.filter(pk=sweep.pk).update(run_at=timezone.now() - timedelta(seconds=1))
        wake_runners()
        assert wait_until(lambda: Job.objects.get(pk=sweep.pk).state == State.DONE, 5)
    assert live_sweeps() == 0, "the sweep stopped repeating"


def test_a_runner_starting_with_retention_zero_retires_the_queued_sweep(make_runner, configure):
    configure(retention_days=7)
    make_runner(registry=sweep_registry()).drain()
    sweep = Job.objects.get(kind=SWEEP_KIND)
    set_row(retention_days=0)
    make_runner(registry=sweep_registry()).drain()
    sweep.refresh_from_db()
    assert (sweep.state, sweep.last_error) == (State.CANCELLED, "schedule removed")
    assert live_sweeps() == 0


def test_retention_set_back_above_zero_schedules_the_sweep_again_without_a_restart(
    make_runner, configure
):
    configure(retention_days=0, poll_interval_ms=50)
    runner = make_runner(registry=sweep_registry())
    with running(runner):
        assert wait_until(lambda: runner._current.retention_days == 0)
        assert live_sweeps() == 0
        set_row(retention_days=3)
        assert wait_until(lambda: Job.objects.filter(kind=SWEEP_KIND).exists(), 5), (
            "turning retention back on scheduled the sweep"
        )
    assert Job.objects.filter(kind=SWEEP_KIND).count() == 1, "one sweep row, however it got there"


@pytest.mark.parametrize(
    "nonsense",
    [
        {"max_concurrent": 0},
        {"retry_base_seconds": 500, "retry_max_seconds": 10},
        {"poll_interval_ms": 0},
    ],
)
def test_a_row_edited_into_nonsense_is_logged_and_the_last_good_config_stays(
    make_runner, configure, caplog, nonsense
):
    configure(poll_interval_ms=50, max_concurrent=2)
    gate = Gate()
    runner = make_runner(registry=gated_registry(gate))
    for n in range(4):
        add_ready_job("test.gated", f"k{n}")
    caplog.set_level(logging.ERROR, logger="jobs")
    with running(runner):
        assert wait_until(lambda: gate.running == 2)
        set_row(**nonsense)
        assert wait_until(lambda: "jobs_config_invalid" in caplog.text, 5), "the bad row was logged"
        assert runner._current.max_concurrent == 2, "the last good config is still in force"
        gate.release.set()
        assert wait_until(lambda: Job.objects.filter(state=State.DONE).count() == 4), (
            "the runner went on draining under the last good config"
        )
    assert caplog.text.count("jobs_config_invalid") == 1, "one problem, logged once"


def test_print_config_shows_each_value_and_where_it_came_from(monkeypatch, settings):
    from io import StringIO

    from django.core.management import call_command

    monkeypatch.setenv("JOBS_MAX_CONCURRENT", "3")
    settings.JOBS = {"max_concurrent": 3, "lease_seconds": 60}
    out = StringIO()
    call_command("runjobs", "--print-config", stdout=out)
    text = out.getvalue()
    assert "no config row yet" in text, text
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "environment (JOBS_MAX_CONCURRENT)" in lines["max_concurrent"]
    assert "settings.JOBS" in lines["lease_seconds"]
    assert " 60 " in lines["lease_seconds"]
    assert "default" in lines["max_attempts"]
    JobsConfig.load()
    set_row(max_attempts=9)
    out = StringIO()
    call_command("runjobs", "--print-config", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines() if line.strip()}
    assert "config row (default says 5: not used, the row is the truth)" in lines["max_attempts"]
    assert " 9 " in lines["max_attempts"]
    assert "config row (as environment (JOBS_MAX_CONCURRENT) says)" in lines["max_concurrent"]


def test_print_config_says_a_variable_set_after_the_row_was_made_is_not_used(monkeypatch, settings):
    """The row is the truth once it exists; claiming it was edited would send an
    operator looking for an edit nobody made."""
    from io import StringIO

    from django.core.management import call_command

    JobsConfig.load()  # made from the defaults
    monkeypatch.setenv("JOBS_LEASE_SECONDS", "15")
    settings.JOBS = {"lease_seconds": 15}  # as the settings module reads the variable
    out = StringIO()
    call_command("runjobs", "--print-config", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines() if line.strip()}

    assert " 300 " in lines["lease_seconds"], "the row's value is the effective one"
    assert (
        "config row (environment (JOBS_LEASE_SECONDS) says 15: not used, the row is the truth)"
        in lines["lease_seconds"]
    )
    assert "edited" not in lines["lease_seconds"]
