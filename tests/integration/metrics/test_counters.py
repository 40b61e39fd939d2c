"""The runner's counters and histograms (`jobs.metrics`): a drain of known
jobs, some retrying and some failing, adds exactly what happened to each."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from freezegun import freeze_time
from prometheus_client import CollectorRegistry, Histogram

from jobs import Done, Failed, JobSpec, Retry, enqueue, enqueue_many, operations
from jobs.metrics import instruments
from jobs.metrics import tally as tally_module
from jobs.metrics.buckets import DURATION_BUCKETS
from jobs.metrics.tally import Tally, observe_many
from jobs.models import Job, State
from jobs.registry import Registry
from tests.helpers import start_loop, wait_until
from tests.integration.metrics.support import Reading, counted, labels, sample
from tests.integration.runner.support import T0, WAIT, Blocks, Recording, install

pytestmark = pytest.mark.django_db(transaction=True)


class Fine(Recording):
    kind = "metrics.fine"


class Flaky(Recording):
    """Retries its first attempt, then succeeds."""

    kind = "metrics.flaky"

    def outcome(self, job: Job) -> Any:
        return Retry("first try") if job.attempts == 1 else Done()


class Broken(Recording):
    kind = "metrics.broken"

    def outcome(self, job: Job) -> Any:
        return Failed("never works")


class Stubborn(Recording):
    """Retries every attempt: out of attempts, it fails."""

    kind = "metrics.stubborn"

    def outcome(self, job: Job) -> Any:
        return Retry("not yet")


def test_a_drain_of_known_jobs_adds_exactly_their_enqueues_starts_outcomes_and_observations(
    registry: Registry, make_runner, configure
):
    configure(max_attempts=2, retry_base_seconds=1, retry_max_seconds=1)
    for handler in (Fine, Flaky, Broken, Stubborn):
        install(registry, handler)
    reading = Reading()
    with freeze_time(T0) as clock:
        queued = enqueue_many(
            [JobSpec.now(Fine.kind, f"fine-{n}") for n in range(3)]
            + [JobSpec.now(Fine.kind, "mail").with_queue("mail")]
            + [JobSpec.now(Flaky.kind, f"flaky-{n}") for n in range(2)]
        )
        assert all(queued)
        assert enqueue(JobSpec.now(Broken.kind, "broken"))
        assert enqueue(JobSpec.now(Stubborn.kind, "stubborn"))
        assert not enqueue(JobSpec.now(Fine.kind, "fine-0")), "a duplicate is refused"
        make_runner(registry=registry).drain()
        clock.tick(timedelta(seconds=5))  # the retries come due
        make_runner(registry=registry).drain()
    assert not Job.objects.exclude(state__in=[State.DONE, State.FAILED]).exists()

    added = reading.added()
    default, mail = "default", "mail"
    assert counted(added, "jobs_enqueued_total") == {
        labels(kind=Fine.kind, queue=default): 3,
        labels(kind=Fine.kind, queue=mail): 1,
        labels(kind=Flaky.kind, queue=default): 2,
        labels(kind=Broken.kind, queue=default): 1,
        labels(kind=Stubborn.kind, queue=default): 1,
    }, "one per row queued; the refused duplicate is not counted"
    assert counted(added, "jobs_attempts_started_total") == {
        labels(kind=Fine.kind, queue=default): 3,
        labels(kind=Fine.kind, queue=mail): 1,
        labels(kind=Flaky.kind, queue=default): 4,
        labels(kind=Broken.kind, queue=default): 1,
        labels(kind=Stubborn.kind, queue=default): 2,
    }
    assert counted(added, "jobs_attempts_finished_total") == {
        labels(kind=Fine.kind, queue=default, outcome="done"): 3,
        labels(kind=Fine.kind, queue=mail, outcome="done"): 1,
        labels(kind=Flaky.kind, queue=default, outcome="retry"): 2,
        labels(kind=Flaky.kind, queue=default, outcome="done"): 2,
        labels(kind=Broken.kind, queue=default, outcome="failed"): 1,
        labels(kind=Stubborn.kind, queue=default, outcome="retry"): 1,
        labels(kind=Stubborn.kind, queue=default, outcome="failed"): 1,
    }
    assert counted(added, "jobs_attempt_duration_seconds_count") == {
        labels(kind=Fine.kind): 4,
        labels(kind=Flaky.kind): 4,
        labels(kind=Broken.kind): 1,
        labels(kind=Stubborn.kind): 2,
    }, "one observation per attempt that ran"
    assert counted(added, "jobs_wait_seconds_count") == {
        labels(queue=default): 10,
        labels(queue=mail): 1,
    }, "one observation per attempt started, by queue"
    waited = counted(added, "jobs_wait_seconds_sum")
    assert waited.get(labels(queue=mail), 0) == 0, "claimed at the frozen instant it was queued"
    assert waited[labels(queue=default)] == pytest.approx(3 * 4), (
        "each of the three retries waited the 4 s from its run_at (T0 + 1 s) to T0 + 5 s"
    )


def test_a_rolled_back_enqueue_counts_nothing():
    reading = Reading()
    with transaction.atomic():
        assert enqueue(JobSpec.now("metrics.any", "gone"))
        transaction.set_rollback(True)
    assert counted(reading.added(), "jobs_enqueued_total") == {}


def test_cancelling_a_running_job_counts_a_cancelled_attempt_and_a_queued_one_counts_none(
    registry: Registry, make_runner, blocked: Blocks
):
    reading = Reading()
    assert enqueue(JobSpec.now(blocked.kind, "running"))
    assert enqueue(JobSpec.now("metrics.unhandled", "waiting"))
    runner = make_runner(registry=registry)
    start_loop(runner)
    assert blocked.started.wait(WAIT)
    running = Job.objects.get(key="running")
    waiting = Job.objects.get(key="waiting")

    operations.cancel([running.id, waiting.id], by="test", registry=registry)

    # In a process with a runner, the note is applied at that runner's next pass.
    wait_until(lambda: counted(reading.added(), "jobs_attempts_finished_total"), WAIT)
    finished = counted(reading.added(), "jobs_attempts_finished_total")
    assert finished == {labels(kind=blocked.kind, queue="default", outcome="cancelled"): 1}


def test_the_runner_s_gauges_show_its_slots_while_it_runs_and_go_when_it_stops(
    registry: Registry, make_runner, configure, blocked: Blocks
):
    configure(max_concurrent=4)
    assert enqueue(JobSpec.now(blocked.kind, "held"))
    runner = make_runner(registry=registry)
    start_loop(runner)
    assert blocked.started.wait(WAIT)
    name = runner.presence.name
    assert (sample("jobs_running", runner=name), sample("jobs_slots_free", runner=name)) == (1, 3)
    blocked.release.set()
    runner.stop()
    assert runner.finish(WAIT)
    runner.close()
    assert not any(
        s.labels.get("runner") == name
        for family in (instruments.running, instruments.slots_free)
        for metric in family.collect()
        for s in metric.samples
    ), "a stopped runner's series is removed, not left at its last value"


def test_a_pass_s_observations_land_in_the_buckets_one_by_one_observes_would():
    """The batched histogram update gives what prometheus_client's own
    `observe` gives, value by value (it reaches into the child's buckets)."""
    values = [0.0, 0.004, 0.005, 0.0051, 0.3, 2.5, 7, 99999, 10**9]
    single = 0.0051
    batched, one_by_one = CollectorRegistry(), CollectorRegistry()
    buckets = DURATION_BUCKETS
    h1 = Histogram("h", "h", ["kind"], buckets=buckets, registry=batched)
    h2 = Histogram("h", "h", ["kind"], buckets=buckets, registry=one_by_one)
    observe_many(h1.labels("k"), values)
    observe_many(h1.labels("one"), [single])
    for value in values:
        h2.labels("k").observe(value)
    h2.labels("one").observe(single)

    def samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
        return [
            (s.name, s.labels, s.value)
            for family in registry.collect()
            for s in family.samples
            if not s.name.endswith("_created")
        ]

    assert samples(batched) == samples(one_by_one)


def test_notes_wait_for_the_tally_s_flush_while_a_runner_holds_it(monkeypatch):
    monkeypatch.setattr(tally_module, "FLUSH_EVERY_SECONDS", 3600)
    tally = Tally()
    job = Job(kind="metrics.held", queue="q", run_at=T0, created_at=T0, started_at=T0)
    before = sample("jobs_attempts_finished_total", kind="metrics.held", queue="q", outcome="done")
    tally.join()
    tally.finished([job, job], "done", T0 + timedelta(seconds=1))
    held = sample("jobs_attempts_finished_total", kind="metrics.held", queue="q", outcome="done")
    tally.leave()
    after = sample("jobs_attempts_finished_total", kind="metrics.held", queue="q", outcome="done")
    assert (held - before, after - before) == (0, 2)


def test_a_row_whose_dates_cannot_be_read_is_counted_with_no_wait_and_breaks_nothing():
    tally = Tally()
    broken = Job(kind="metrics.bad", queue="q", run_at=T0, started_at=None)
    broken.created_at = None  # type: ignore[assignment]  # a date the claim could not read
    before = sample("jobs_attempts_started_total", kind="metrics.bad", queue="q")
    waited = sample("jobs_wait_seconds_sum", queue="q")
    tally.started([broken], T0 + timedelta(seconds=3))
    tally.finished([broken], "failed", T0 + timedelta(seconds=4))
    assert sample("jobs_attempts_started_total", kind="metrics.bad", queue="q") - before == 1
    assert sample("jobs_wait_seconds_sum", queue="q") - waited == 3, "from its run_at"
    assert sample("jobs_attempt_duration_seconds_count", kind="metrics.bad") >= 1


def test_a_naive_clock_beside_aware_row_dates_measures_the_wait_in_the_current_zone(settings):
    """With USE_TZ off, the runner's clock is naive while a row's dates can come back aware."""
    settings.USE_TZ = False
    settings.TIME_ZONE = "Europe/Paris"  # UTC+1 in January
    tally = Tally()
    job = Job(kind="metrics.naive", queue="naive", run_at=T0, created_at=T0, started_at=None)
    naive_now = datetime(2030, 1, 1, 13, 0, 5)  # T0 (12:00 UTC) + 5 s, as Paris reads it
    before = sample("jobs_wait_seconds_sum", queue="naive")
    tally.started([job], naive_now)
    assert sample("jobs_wait_seconds_sum", queue="naive") - before == pytest.approx(5)


def test_a_flush_that_fails_is_logged_and_never_raised(monkeypatch, caplog):
    tally = Tally()

    def broken(*args: object) -> None:
        raise RuntimeError("registry gone")

    monkeypatch.setattr(tally, "_child", broken)
    job = Job(kind="metrics.any", queue="q", run_at=T0, created_at=T0, started_at=T0)
    tally.started([job], T0)  # no runner holds it: applied now, and it fails
    assert "metrics_flush_failed" in caplog.text
