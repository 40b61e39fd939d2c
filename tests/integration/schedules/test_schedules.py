"""Schedules through a real runner, with time frozen: each occurrence a job of
its own, the next one reckoned from the fire time (never from the settle),
missed fire times skipped or run once, an operator's disable honoured at the
claim, and the reconcile that keeps rows in line with the settings."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.tasks import default_task_backend
from freezegun import freeze_time

from jobs import Done, Failed, JobHandler, Retry, operations
from jobs.checks import check_schedules
from jobs.models import Job, Schedule, State
from jobs.registry import Registry
from jobs.registry import registry as default_registry
from jobs.schedules import hook as schedules_hook
from jobs.schedules import operator
from jobs.schedules.reconcile import reconcile
from jobs.schedules.reconcile import repair as reconcile_repair
from jobs.tasks import TaskHandler
from tests.jobapp import tasks as test_tasks

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Ran:
    """What the test handler was asked to do, and what it did."""

    clock: Any = None  # freezegun's frozen clock, ticked by "durations"
    durations: list[float] = []
    outcomes: list[object] = []
    calls: list[tuple[str, datetime]] = []


class ScheduledHandler(JobHandler):
    kind = "test.scheduled"

    def run(self, job: Job) -> object:
        from django.utils import timezone

        Ran.calls.append((job.key, timezone.now()))
        if Ran.durations:
            Ran.clock.tick(timedelta(seconds=Ran.durations.pop(0)))
        return Ran.outcomes.pop(0) if Ran.outcomes else Done()


@pytest.fixture
def scheduled(registry: Registry, settings) -> Registry:
    Ran.clock, Ran.durations, Ran.outcomes, Ran.calls = None, [], [], []
    registry.register(ScheduledHandler)
    settings.JOBS_SCHEDULES = {}
    return registry


def declare(settings, **schedules: dict[str, Any]) -> None:
    settings.JOBS_SCHEDULES = {
        name: {"kind": ScheduledHandler.kind, **options} for name, options in schedules.items()
    }


def occurrences(name: str) -> list[Job]:
    return list(Job.objects.filter(key=f"schedule:{name}").order_by("created_at", "run_at"))


def first_hour(runner) -> None:
    """Start `runner` just after T0 (planning an hourly schedule for 13:00),
    then move to 13:00 and let the occurrence run."""
    with freeze_time(T0 + timedelta(minutes=1)) as frozen:
        runner.drain()
        frozen.move_to(T0 + timedelta(hours=1))
        runner.drain()


def live(name: str) -> Job:
    return Job.objects.get(key=f"schedule:{name}", live=True)


def test_a_runners_start_plans_each_schedule_due_at_its_next_fire_time(
    scheduled, settings, make_runner
):
    declare(settings, nightly={"cron": "0 2 * * *", "timezone": "Europe/Paris"})
    with freeze_time(T0):
        make_runner(registry=scheduled).drain()
    row = Schedule.objects.get(name="nightly")
    job = live("nightly")
    assert (job.kind, job.state) == (ScheduledHandler.kind, State.QUEUED)
    assert job.run_at == row.due_at == datetime(2030, 1, 2, 1, 0, tzinfo=UTC), "02:00 in Paris"
    assert Ran.calls == [], "nothing runs before its fire time"


def test_each_occurrence_is_a_job_of_its_own_and_the_next_is_queued_when_it_ends(
    scheduled, settings, make_runner
):
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    first_hour(make_runner(registry=scheduled))
    first, second = occurrences("hourly")
    assert (first.state, first.run_at) == (State.DONE, T0 + timedelta(hours=1))
    assert (second.state, second.run_at) == (State.QUEUED, T0 + timedelta(hours=2))
    row = Schedule.objects.get(name="hourly")
    assert (row.last_fire_at, row.last_outcome, row.last_job_id) == (
        T0 + timedelta(hours=1),
        "done",
        first.id,
    )


def test_a_thousand_occurrences_of_random_lengths_never_drift_from_their_fire_times(
    scheduled, settings, make_runner, configure
):
    """Each starts up to a minute late and takes up to almost five minutes:
    still every fire time is exactly on the grid, and none is skipped. (The
    frozen clock jumps over each attempt, leaving no moment to renew a
    heartbeat lease, so the lease here is the whole budget.)"""
    configure(heartbeat_seconds=0)
    declare(settings, often={"cron": "*/5 * * * *", "timezone": "Europe/Paris"})
    rng = random.Random(20261206)
    count = 1000
    runner = make_runner(registry=scheduled)
    # Clear of DST changes: freezegun's datetimes lose `fold`, which the
    # repeated hour needs (test_schedule_timing covers DST with real ones).
    start = datetime(2026, 11, 2, 12, 1, tzinfo=UTC)
    with freeze_time(start) as frozen:
        Ran.clock = frozen
        runner.drain()
        for _ in range(count):
            due = live("often").run_at
            frozen.move_to(due + timedelta(seconds=rng.uniform(0, 60)))
            Ran.durations.append(rng.uniform(0, 230))
            runner.drain()
    fire_times = [job.run_at for job in occurrences("often")]
    assert len(fire_times) == count + 1
    expected = [start + timedelta(minutes=4 + 5 * n) for n in range(count + 1)]
    assert fire_times == expected, "every occurrence is due on the five-minute grid"
    assert len(Ran.calls) == count, "each ran once"


@pytest.mark.parametrize(("missed", "runs_after_the_gap"), [("skip", 0), ("once", 1)])
def test_after_a_three_hour_gap_missed_fire_times_are_skipped_or_run_once(
    scheduled, settings, make_runner, missed, runs_after_the_gap
):
    declare(settings, quarterly={"cron": "*/15 * * * *", "timezone": "UTC", "missed": missed})
    with freeze_time(T0 + timedelta(minutes=1)) as frozen:
        make_runner(registry=scheduled).drain()
        assert live("quarterly").run_at == T0 + timedelta(minutes=15)
        frozen.move_to(T0 + timedelta(hours=3, minutes=7))  # twelve fire times went by
        make_runner(registry=scheduled).drain()
    assert len(Ran.calls) == runs_after_the_gap
    nxt = live("quarterly")
    assert nxt.run_at == T0 + timedelta(hours=3, minutes=15), "then on at the next fire time"
    assert Schedule.objects.get(name="quarterly").due_at == nxt.run_at


def test_a_retried_occurrence_keeps_its_fire_time_and_the_next_follows_the_schedule(
    scheduled, settings, make_runner, configure
):
    configure(retry_base_seconds=30, max_attempts=3)
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    Ran.outcomes = [Retry("upstream 503"), Done()]
    runner = make_runner(registry=scheduled)
    with freeze_time(T0 + timedelta(minutes=1)) as frozen:
        runner.drain()
        frozen.move_to(T0 + timedelta(hours=1))
        runner.drain()
        retried = live("hourly")
        assert (retried.attempts, retried.run_at) == (1, T0 + timedelta(hours=1, seconds=30))
        frozen.move_to(retried.run_at)
        runner.drain()
    first, second = occurrences("hourly")
    assert (first.state, first.attempts) == (State.DONE, 2), "the same occurrence, retried"
    assert second.run_at == T0 + timedelta(hours=2), "reckoned from 13:00, not from the retry"
    assert second.attempts == 0, "the next occurrence has a fresh budget"


def test_an_occurrence_that_fails_for_good_does_not_stop_the_schedule(
    scheduled, settings, make_runner
):
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    Ran.outcomes = [Failed("the report's source is gone")]
    first_hour(make_runner(registry=scheduled))
    first, second = occurrences("hourly")
    assert first.state == State.FAILED
    assert (second.state, second.run_at) == (State.QUEUED, T0 + timedelta(hours=2))
    assert Schedule.objects.get(name="hourly").last_outcome == "failed"


def test_a_disabled_schedule_skips_its_occurrence_at_the_claim_and_resumes_when_enabled(
    scheduled, settings, make_runner, caplog
):
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    runner = make_runner(registry=scheduled)
    with freeze_time(T0 + timedelta(minutes=1)) as frozen:
        runner.drain()
        operator.set_enabled("hourly", False, by="admin:ops")
        frozen.move_to(T0 + timedelta(hours=1))
        runner.drain()
        assert Ran.calls == [], "a disabled schedule's occurrence does not start"
        skipped = live("hourly")
        assert (skipped.run_at, skipped.attempts) == (T0 + timedelta(hours=2), 0)
        operator.set_enabled("hourly", True, by="admin:ops")
        frozen.move_to(T0 + timedelta(hours=2))
        runner.drain()
    assert len(Ran.calls) == 1, "enabled again, it runs at its next fire time"
    row = Schedule.objects.get(name="hourly")
    assert (row.enabled, row.changed_by) == (True, "admin:ops")
    assert "schedule_occurrence_skipped" in caplog.text
    assert "jobs_schedule_changed schedule=hourly enabled=False by=admin:ops" in caplog.text


def test_cancelling_a_queued_occurrence_skips_it_and_queues_the_next_fire_time(
    scheduled, settings, make_runner
):
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    with freeze_time(T0 + timedelta(minutes=1)):
        make_runner(registry=scheduled).drain()
        first = live("hourly")
        operations.cancel([first.id], by="cli:ops", registry=scheduled)
    nxt = live("hourly")
    assert nxt.id != first.id
    assert nxt.run_at == T0 + timedelta(hours=2)


def test_run_now_on_an_occurrence_runs_it_early_and_keeps_the_schedules_fire_time(
    scheduled, settings, make_runner
):
    declare(settings, nightly={"cron": "0 2 * * *", "timezone": "UTC"})
    runner = make_runner(registry=scheduled)
    with freeze_time(T0):
        runner.drain()
        first = live("nightly")
        assert operations.run_now([first.id]).touched == 1
        runner.drain()
    assert len(Ran.calls) == 1
    assert live("nightly").run_at == datetime(2030, 1, 2, 2, 0, tzinfo=UTC), (
        "the 02:00 run still happens"
    )
    assert Schedule.objects.get(name="nightly").last_fire_at == T0, "the early run is the last"


def test_three_reconciles_create_each_schedules_row_and_occurrence_once(scheduled, settings):
    declare(settings, a={"every": 60}, b={"cron": "0 2 * * *"})
    for _ in range(3):
        reconcile(scheduled)
    assert Schedule.objects.count() == 2
    assert Job.objects.filter(key__startswith="schedule:").count() == 2


def test_a_changed_expression_replans_the_queued_occurrence(scheduled, settings):
    declare(settings, report={"cron": "0 2 * * *", "timezone": "UTC"})
    with freeze_time(T0):
        reconcile(scheduled)
        old = live("report")
        declare(settings, report={"cron": "30 13 * * *", "timezone": "UTC"})
        reconcile(scheduled)
    old.refresh_from_db()
    assert (old.state, old.last_error) == (State.CANCELLED, "schedule changed")
    assert live("report").run_at == T0 + timedelta(hours=1, minutes=30)
    assert Schedule.objects.get(name="report").definition["cron"] == "30 13 * * *"


def test_a_schedule_removed_from_settings_is_retired_at_the_next_start(
    scheduled, settings, make_runner
):
    declare(settings, gone={"every": 3600}, kept={"every": 3600})
    with freeze_time(T0):
        make_runner(registry=scheduled).drain()
        queued = live("gone")
        declare(settings, kept={"every": 3600})
        make_runner(registry=scheduled).drain()
    queued.refresh_from_db()
    assert (queued.state, queued.last_error) == (State.CANCELLED, "schedule removed")
    assert not Schedule.objects.filter(name="gone").exists()
    assert not Job.objects.filter(key="schedule:gone", live=True).exists()
    assert Job.objects.filter(key="schedule:kept", live=True).count() == 1


def test_a_handlers_schedule_attribute_is_a_schedule_named_after_its_kind(registry, settings):
    settings.JOBS_SCHEDULES = {}

    class Nightly(JobHandler):
        kind = "test.nightly"
        schedule = "0 2 * * *"

    registry.register(Nightly)
    with freeze_time(T0):
        reconcile(registry)
    job = live("test.nightly")
    assert (job.kind, job.payload) == ("test.nightly", {})
    assert Schedule.objects.get(name="test.nightly").definition["timezone"] == settings.TIME_ZONE


def test_a_task_on_a_schedule_runs_through_the_backend_and_its_result_is_readable(
    registry, settings, make_runner
):
    registry.register(TaskHandler)
    settings.JOBS_SCHEDULES = {
        "sums": {"task": "tests.jobapp.tasks.add", "every": 60, "args": [2, 3]},
    }
    with freeze_time(T0 + timedelta(seconds=1)) as frozen:
        make_runner(registry=registry).drain()
        frozen.move_to(T0 + timedelta(minutes=1))
        make_runner(registry=registry).drain()
    done = Job.objects.get(key="schedule:sums", state=State.DONE)
    result = default_task_backend.get_result(str(done.id))
    assert result.return_value == 5
    assert result.task.func is test_tasks.add.func


@pytest.mark.parametrize(
    ("options", "sentence"),
    [
        ({"kind": "test.scheduled", "cron": "0 25 * * *"}, "bad cron expression '0 25 * * *'"),
        (
            {"kind": "test.scheduled", "cron": "0 2 * * *", "timezone": "Mars/Olympus"},
            "unknown timezone",
        ),
        ({"kind": "test.nothing", "every": 60}, "no handler is registered for kind 'test.nothing'"),
        ({"task": "tests.jobapp.tasks.nothing", "every": 60}, "cannot import task"),
        ({"kind": "test.scheduled", "every": 60, "cron": "* * * * *"}, "not both or neither"),
        ({"kind": "test.scheduled"}, "not both or neither"),
        ({"kind": "test.scheduled", "every": 60, "missed": "later"}, "missed must be"),
    ],
)
def test_a_schedule_that_cannot_work_is_a_check_error_and_runjobs_refuses_with_its_sentence(
    settings, options, sentence
):
    default_registry.register(ScheduledHandler)
    try:
        settings.JOBS_SCHEDULES = {"broken": options}
        errors = check_schedules(None)
        assert [error.id for error in errors] == ["jobs.E007"]
        assert errors[0].msg.startswith("JOBS_SCHEDULES['broken']: ")
        assert sentence in errors[0].msg
        with pytest.raises(CommandError) as refused:
            call_command("runjobs", "--burst")
        assert str(refused.value) == errors[0].msg
    finally:
        default_registry._handlers.pop(ScheduledHandler.kind, None)


@pytest.mark.parametrize(
    ("zone", "expression", "start", "expected"),
    [
        # Paris, spring: 02:30 does not exist on 29 March; it runs at 03:00, once.
        (
            "Europe/Paris",
            "30 2 * * *",
            datetime(2026, 3, 28, 12, tzinfo=UTC),
            ["2026-03-29T01:00", "2026-03-30T00:30", "2026-03-31T00:30"],
        ),
        # New York, autumn: 01:30 happens twice on 1 November; it runs once, at 01:30 EDT.
        (
            "America/New_York",
            "30 1 * * *",
            datetime(2026, 10, 31, 12, tzinfo=UTC),
            ["2026-11-01T05:30", "2026-11-02T06:30", "2026-11-03T06:30"],
        ),
    ],
)
def test_across_a_dst_change_a_daily_schedule_runs_once_a_day_through_a_runner(
    scheduled, settings, make_runner, zone, expression, start, expected
):
    declare(settings, daily={"cron": expression, "timezone": zone})
    runner = make_runner(registry=scheduled)
    with freeze_time(start) as frozen:
        runner.drain()
        for _ in expected:
            frozen.move_to(live("daily").run_at)
            runner.drain()
    ran = [job.run_at.strftime("%Y-%m-%dT%H:%M") for job in occurrences("daily")[:-1]]
    assert ran == expected
    assert len(Ran.calls) == len(expected), "each day's fire time ran once"


def test_with_use_tz_false_fire_times_are_wall_times_in_time_zone(scheduled, settings, make_runner):
    """Rows hold naive wall times in `TIME_ZONE` then; Tokyo is nine hours from
    UTC, so a mix-up cannot pass."""
    settings.USE_TZ = False
    settings.TIME_ZONE = "Asia/Tokyo"
    declare(settings, nightly={"cron": "0 2 * * *"})
    wall = datetime(2030, 1, 1, 12, 0)
    make_runner(registry=scheduled, clock=lambda: wall).drain()
    first = live("nightly")
    assert first.run_at == datetime(2030, 1, 2, 2, 0), "02:00 in Tokyo, as a naive wall time"
    make_runner(registry=scheduled, clock=lambda: datetime(2030, 1, 2, 2, 0)).drain()
    assert len(Ran.calls) == 1
    assert live("nightly").run_at == datetime(2030, 1, 3, 2, 0)


def test_a_schedule_row_edited_into_nonsense_and_then_fixed_is_picked_up_without_a_restart(
    scheduled, settings, make_runner, caplog, monkeypatch
):
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    with freeze_time(T0 + timedelta(minutes=1)) as frozen:
        make_runner(registry=scheduled).drain()  # its start plans the schedule
        good = Schedule.objects.get(name="hourly").definition
        Schedule.objects.filter(name="hourly").update(definition={**good, "timezone": "Mars/Base"})
        frozen.move_to(T0 + timedelta(hours=1))
        make_runner(registry=scheduled, recover=False).drain()  # a runner already running
        assert len(Ran.calls) == 1, "the occurrence already queued still runs"
        assert not Job.objects.filter(key="schedule:hourly", live=True).exists(), (
            "no successor can be reckoned from a row that says nothing"
        )
        assert "schedule_invalid" in caplog.text
        assert reconcile_repair() == 0, "still nonsense: nothing to repair from"
        Schedule.objects.filter(name="hourly").update(definition=good)
        frozen.move_to(T0 + timedelta(hours=1, minutes=30))
        monkeypatch.setattr(schedules_hook, "REPAIR_SECONDS", 0)
        make_runner(registry=scheduled).run_pass()  # a running runner's upkeep, no start-up
        assert reconcile_repair() == 0, "a schedule with a live occurrence is left alone"
    assert live("hourly").run_at == T0 + timedelta(hours=2), "resumed at its next fire time"
    assert "schedule_repaired schedule=hourly" in caplog.text


def test_an_occurrence_whose_row_names_an_impossible_queue_still_settles(
    scheduled, settings, make_runner, caplog
):
    declare(settings, hourly={"cron": "0 * * * *", "timezone": "UTC"})
    with freeze_time(T0 + timedelta(minutes=1)) as frozen:
        make_runner(registry=scheduled).drain()
        good = Schedule.objects.get(name="hourly").definition
        Schedule.objects.filter(name="hourly").update(definition={**good, "queue": "no spaces"})
        frozen.move_to(T0 + timedelta(hours=1))
        make_runner(registry=scheduled, recover=False).drain()
    (first,) = occurrences("hourly")
    assert first.state == State.DONE, "the settle committed although no successor could be queued"
    assert "schedule_invalid" in caplog.text
