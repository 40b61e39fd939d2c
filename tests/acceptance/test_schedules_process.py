"""Schedules across real `runjobs` processes: runners started together plan each
schedule once and run each fire time once; a runner killed mid-occurrence costs
a lease's wait, never the fire time nor a second run of it; a schedule removed
from the settings is retired at the next start; disabling stops the next
occurrence from starting, enabling resumes at a fire time; a `django.tasks`
task on a schedule leaves results `get_result` reads.

Each `runjobs` reads its schedules from `TEST_JOBS_SCHEDULES` (tests/settings.py).
Idle runners look for due work every 100 ms here (the default is a second), so
an `every` schedule of a second or two starts each occurrence well within its
interval, never late enough to count as missed.
"""

from __future__ import annotations

import json
import signal
import socket
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from django.db.models import QuerySet
from django.tasks import TaskResultStatus, default_task_backend
from django.urls import reverse
from django.utils import timezone

from jobs.models import LIVE_ROWS, Job, Schedule
from tests.conftest import RunJobs
from tests.helpers import wait_until
from tests.jobapp import tasks
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

#: A daily cron (UTC) whose fire time went by an hour before this module was
#: imported: a schedule that must not fire while a test runs.
_AN_HOUR_AGO = datetime.now(UTC) - timedelta(hours=1)
NIGHTLY = f"{_AN_HOUR_AGO.minute} {_AN_HOUR_AGO.hour} * * *"


@pytest.fixture(autouse=True)
def quick_poll(configure) -> None:
    """Idle runners look for due occurrences every 100 ms."""
    configure(poll_interval_ms=100)


def with_schedules(**schedules: dict[str, Any]) -> dict[str, str]:
    """The environment that gives a `runjobs` process these `JOBS_SCHEDULES`."""
    return {"TEST_JOBS_SCHEDULES": json.dumps(schedules)}


def occurrences(name: str) -> QuerySet[Job]:
    """Every occurrence row of the schedule `name`, live or settled."""
    return Job.objects.filter(key=f"schedule:{name}")


def live_count(name: str) -> int:
    return occurrences(name).filter(LIVE_ROWS).count()


def executions(name: str) -> QuerySet[Execution]:
    """Every attempt of the schedule `name`'s occurrences that reached the handler."""
    return Execution.objects.filter(key=f"schedule:{name}")


def stop(*processes: RunJobs) -> None:
    """SIGTERM each runner, and check each stopped cleanly."""
    for process in processes:
        process.process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(30) == 0, process.output()


def on_the_grid(moment: datetime, seconds: int) -> bool:
    """Whether `moment` is a multiple of `seconds` since the Unix epoch."""
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) % timedelta(seconds=seconds) == timedelta(0)


def runner_name(process: RunJobs) -> str:
    return f"{socket.gethostname()}:{process.pid}"


def test_three_runners_started_at_once_plan_each_schedule_once_and_run_each_fire_time_once(
    runjobs,
):
    env = with_schedules(
        tick={"kind": "test.record", "every": 2},
        nightly={"kind": "test.record", "cron": NIGHTLY},
    )
    started_at = timezone.now()
    runners = [runjobs(env=env) for _ in range(3)]
    wait_until(
        lambda: live_count("tick") and live_count("nightly"), 30, "a runner plans both schedules"
    )
    live_samples: list[tuple[int, int]] = []

    def ticked_four_times() -> bool:
        live_samples.append((live_count("tick"), live_count("nightly")))
        return occurrences("tick").filter(state="done").count() >= 4

    wait_until(ticked_four_times, 40, "four fire times of 'tick' ran")
    stop(*runners)

    outputs = [runner.output() for runner in runners]
    assert all("runner_started" in output for output in outputs), "all three runners ran"
    assert not any("schedules_reconcile_failed" in output for output in outputs), outputs
    for name in ("tick", "nightly"):
        assert Schedule.objects.filter(name=name).count() == 1
        planned = sum(output.count(f"schedule_planned schedule={name} ") for output in outputs)
        assert planned == 1, f"one runner of the three planned {name!r}'s first occurrence"
    assert set(live_samples) == {(1, 1)}, (
        "each schedule had exactly one live occurrence at every look, never none, never two"
    )

    [nightly] = occurrences("nightly")
    assert nightly.state == "queued", "the nightly schedule's one occurrence waits for its time"
    next_fire = started_at.astimezone(UTC).replace(
        hour=_AN_HOUR_AGO.hour, minute=_AN_HOUR_AGO.minute, second=0, microsecond=0
    )
    if next_fire <= started_at:
        next_fire += timedelta(days=1)
    assert nightly.run_at == next_fire, "due at its next daily fire time"

    states = Counter(occurrences("tick").values_list("state", flat=True))
    assert set(states) == {"done", "queued"}, f"nothing cancelled or failed: {states}"
    assert states["queued"] == 1, "the next occurrence is queued"
    done = list(occurrences("tick").filter(state="done").order_by("run_at"))
    fire_times = [job.run_at for job in done]
    ran = list(executions("tick"))
    fired = {job.id: job.run_at for job in done}
    late = [round((row.started_at - fired[row.job_id]).total_seconds(), 3) for row in ran]
    print(
        f"\n'tick' ran {len(done)} fire times; executions per process "
        f"{dict(Counter(row.pid for row in ran))}; each started after its fire time by {late} s"
    )
    assert all(on_the_grid(moment, 2) for moment in fire_times), fire_times
    assert [b - a for a, b in pairwise(fire_times)] == [timedelta(seconds=2)] * (
        len(fire_times) - 1
    ), f"one occurrence per fire time, none skipped: {fire_times}"
    assert sorted((row.job_id, row.attempt) for row in ran) == sorted(
        (job.id, 1) for job in done
    ), "each done occurrence ran once, in one process, and nothing else ran"


def test_a_runner_killed_mid_occurrence_neither_loses_the_schedule_nor_runs_its_fire_time_twice(
    runjobs,
):
    """The first occurrence's first attempt sleeps 30 s under a 2 s budget (a 3 s
    lease); its runner is SIGKILLed inside it. The other runner reclaims the row
    once the lease expires (attempt 2), and the schedule goes on from there."""
    env = {
        **with_schedules(
            crashy={"kind": "test.first_sleeps", "every": 2, "payload": {"seconds": 30}}
        ),
        "TEST_SLEEP_LEASE": "2",
    }
    runners = [runjobs(env=env) for _ in range(2)]
    wait_until(lambda: live_count("crashy"), 30, "a runner plans the schedule")
    live_samples: list[int] = []

    def sampled(predicate):
        def check() -> bool:
            live_samples.append(live_count("crashy"))
            return bool(predicate())

        return check

    wait_until(sampled(lambda: executions("crashy").exists()), 30, "the first occurrence starts")
    first = executions("crashy").get()
    [victim] = [runner for runner in runners if runner.pid == first.pid]
    [survivor] = [runner for runner in runners if runner is not victim]
    victim.process.send_signal(signal.SIGKILL)
    killed_at = timezone.now()
    assert victim.wait(10) == -signal.SIGKILL, "the runner died of SIGKILL"

    retried = executions("crashy").filter(job_id=first.job_id, attempt=2)
    wait_until(sampled(retried.exists), 15, "the other runner reclaims the occurrence")
    reclaim = retried.get()
    wait_until(
        sampled(lambda: executions("crashy").exclude(job_id=first.job_id).count() >= 2),
        15,
        "the next occurrences follow",
    )
    stop(survivor)
    print(
        f"\nreclaimed {(reclaim.started_at - killed_at).total_seconds():.2f} s after the "
        f"SIGKILL ({(reclaim.started_at - first.started_at).total_seconds():.2f} s after "
        "attempt 1 started)"
    )

    assert set(live_samples) == {1}, "exactly one live occurrence at every look"
    crashed = Job.objects.get(id=first.job_id)
    assert (crashed.state, crashed.attempts) == ("done", 2), (
        "the killed occurrence is taken over as attempt 2 and completes"
    )
    assert [entry.runner for entry in crashed.attempt_history] == [runner_name(victim)], (
        "the lost attempt is on its record, naming the runner killed"
    )
    assert "job_reclaimed" in survivor.output()
    assert reclaim.pid == survivor.pid, "the surviving runner ran attempt 2"
    reclaim.refresh_from_db()  # read when it started: it may not have finished then
    assert reclaim.finished_at is not None, "to its end"
    assert occurrences("crashy").filter(run_at=crashed.run_at).count() == 1, (
        "its fire time is one occurrence row"
    )
    later = list(executions("crashy").exclude(job_id=first.job_id))
    assert all(row.started_at > reclaim.started_at for row in later), (
        "no other occurrence ran while the killed one held its lease"
    )
    later_jobs = list(
        occurrences("crashy").filter(id__in=[row.job_id for row in later]).order_by("run_at")
    )
    assert len(later_jobs) == len(later), "each later occurrence ran once"
    assert all(row.attempt == 1 for row in later)
    fire_times = [crashed.run_at] + [job.run_at for job in later_jobs]
    assert fire_times == sorted(set(fire_times)), (
        f"each later one at a later fire time: {fire_times}"
    )
    assert all(on_the_grid(moment, 2) for moment in fire_times), fire_times
    assert live_count("crashy") == 1, "and the schedule goes on"


def test_a_schedule_removed_from_the_settings_is_retired_at_the_next_runners_start(runjobs):
    kept = {"kind": "test.record", "cron": NIGHTLY}
    before = runjobs(env=with_schedules(gone={"kind": "test.record", "cron": NIGHTLY}, kept=kept))
    wait_until(
        lambda: live_count("gone") == 1 and live_count("kept") == 1,
        30,
        "the first runner plans both schedules",
    )
    stop(before)
    [gone] = occurrences("gone")
    [stays] = occurrences("kept")
    assert Schedule.objects.filter(name="gone").exists()

    after = runjobs("--burst", env=with_schedules(kept=kept))
    assert after.wait(30) == 0, after.output()

    gone.refresh_from_db()
    assert (gone.state, gone.last_error) == ("cancelled", "schedule removed"), (
        "the removed schedule's queued occurrence is cancelled, saying why"
    )
    assert not Schedule.objects.filter(name="gone").exists(), "its row is gone"
    assert occurrences("gone").count() == 1, "and nothing new is queued for it"
    assert "schedule_removed schedule=gone " in after.output()
    stays.refresh_from_db()
    assert stays.state == "queued", "the schedule still declared keeps its occurrence"
    assert list(occurrences("kept")) == [stays], "the same one, and only it"
    assert Schedule.objects.filter(name="kept").exists()


def in_the_admin(client, action: str, name: str) -> None:
    """Run a Schedules page action on `name`, as an operator does."""
    page = reverse("admin:jobs_schedule_changelist")
    answer = client.post(page, {"action": action, "_selected_action": [name], "index": 0})
    assert answer.status_code == 302, answer.content.decode()[:500]


def test_disabling_a_schedule_in_the_admin_stops_its_next_occurrence_and_enabling_resumes_it(
    runjobs, admin_client
):
    runner = runjobs(env=with_schedules(beat={"kind": "test.record", "every": 1}))
    wait_until(lambda: executions("beat").count() >= 2, 30, "the schedule runs")

    in_the_admin(admin_client, "disable_selected", "beat")
    disabled_at = timezone.now()

    def skips() -> int:
        """Occurrences the runner skipped as disabled (the log's line names the reason)."""
        return sum(
            " schedule=beat " in line and 'reason="the schedule is disabled"' in line
            for line in runner.output().splitlines()
            if " schedule_occurrence_skipped " in line
        )

    wait_until(lambda: skips() >= 1, 10, "the next occurrence is skipped")
    first_skip_seen = timezone.now()
    ran_before = executions("beat").count()
    rows_before = occurrences("beat").count()
    wait_until(lambda: skips() >= 3, 10, "two more fire times pass disabled")
    assert executions("beat").count() == ran_before, "no occurrence starts while disabled"
    assert occurrences("beat").count() == rows_before, (
        "each skipped occurrence moves on to the next fire time: no new row, none run"
    )
    row = Schedule.objects.get(name="beat")
    assert (row.enabled, row.changed_by, row.last_outcome) == (False, "admin:admin", "skipped")
    [waiting] = occurrences("beat").filter(LIVE_ROWS)
    assert waiting.attempts == 0, "a skip spends no attempt"

    in_the_admin(admin_client, "enable_selected", "beat")
    enabled_at = timezone.now()
    wait_until(lambda: executions("beat").count() >= ran_before + 2, 10, "the schedule resumes")
    stop(runner)
    print(
        f"\nfirst skip seen {(first_skip_seen - disabled_at).total_seconds():.2f} s after "
        f"disabling; {skips()} skipped in all"
    )

    assert (
        not executions("beat")
        .filter(started_at__gte=first_skip_seen, started_at__lt=enabled_at)
        .exists()
    ), "nothing started between the first skip and the enable"
    resumed = occurrences("beat").filter(
        id__in=executions("beat").filter(started_at__gte=enabled_at).values("job_id")
    )
    fire_times = sorted(resumed.values_list("run_at", flat=True))
    assert fire_times, "occurrences ran after the enable"
    assert fire_times[0] > enabled_at - timedelta(seconds=1), (
        f"it resumes at a fire time after the enable, no fire time of the disabled stretch "
        f"caught up: {fire_times}"
    )
    assert len(set(fire_times)) == len(fire_times) == resumed.count()


def test_a_task_on_a_schedule_runs_in_a_runner_and_get_result_reads_its_results(runjobs):
    runner = runjobs(
        env=with_schedules(
            answer={"task": "tests.jobapp.tasks.add", "every": 1, "args": [20], "kwargs": {"b": 22}}
        )
    )
    done = occurrences("answer").filter(state="done")
    wait_until(lambda: done.count() >= 2, 30, "two occurrences of the task ran")
    stop(runner)

    for job in done:
        assert job.kind == "django.task"
        result = tasks.add.get_result(str(job.id))
        assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
        assert (list(result.args), dict(result.kwargs)) == ([20], {"b": 22})
        assert default_task_backend.get_result(str(job.id)).return_value == 42
    assert live_count("answer") == 1, "and the next occurrence is queued"
