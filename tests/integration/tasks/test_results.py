"""A task's result and signals, read through Django's own API, as Django 6.1 documents them.

`TaskResult.errors` holds one `TaskError` per attempt that did not succeed,
oldest first; `worker_ids` names the runner of each attempt (so `attempts`,
their count, is right); `started_at` is the first attempt's start and
`last_attempted_at` the last's; `task_started` fires at each attempt's start
and `task_finished` once, when the result becomes terminal, with the row
already settled.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.tasks import TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from freezegun import freeze_time

from jobs import history
from jobs.history import AttemptReclaimed, AttemptTimedOut, JobCancelled, JobNotRun
from jobs.models import Job, State
from jobs.operations import cancel
from jobs.registry import Registry
from jobs.store import for_database
from jobs.store.admission import Admission
from jobs.tasks import KIND, JobsBackend, TaskHandler
from tests.integration.runner.support import T0, WAIT
from tests.jobapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


class Heard:
    """What Django's task signals said, with the row's state as each arrived."""

    def __init__(self) -> None:
        self.started: list[Any] = []
        self.finished: list[Any] = []
        self.states_when_finished: list[str] = []
        self.first_start = threading.Event()

    def on_started(self, sender: Any, task_result: Any, **kwargs: Any) -> None:
        assert sender is JobsBackend, "the sender is the backend's class, as Django's backends send"
        self.started.append((task_result.status, task_result.attempts))
        self.first_start.set()

    def on_finished(self, sender: Any, task_result: Any, **kwargs: Any) -> None:
        assert sender is JobsBackend, "the sender is the backend's class, as Django's backends send"
        self.finished.append(task_result)
        row = Job.objects.get(id=task_result.id)
        self.states_when_finished.append(row.state)


@pytest.fixture
def heard() -> Iterator[Heard]:
    listening = Heard()
    task_started.connect(listening.on_started)
    task_finished.connect(listening.on_finished)
    yield listening
    task_started.disconnect(listening.on_started)
    task_finished.disconnect(listening.on_finished)


@pytest.fixture
def registry() -> Registry:
    registry = Registry()
    registry.register(TaskHandler)
    return registry


@pytest.fixture
def drain(make_runner, configure, registry):
    """Run every ready task job to its settle with immediate retries; the runner."""
    configure(retry_base_seconds=0, retry_max_seconds=0)

    def run() -> Any:
        runner = make_runner(registry=registry)
        runner.drain()
        return runner

    return run


def test_errors_hold_one_task_error_per_failed_attempt_oldest_first(drain, configure):
    configure(max_attempts=3)
    result = tasks.fail_each.enqueue()
    drain()
    finished = tasks.fail_each.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED
    assert [error.exception_class for error in finished.errors] == [ValueError] * 3
    assert [error.traceback.splitlines()[-1] for error in finished.errors] == [
        "ValueError: attempt 1 fails",
        "ValueError: attempt 2 fails",
        "ValueError: attempt 3 fails",
    ], "each error is its own attempt's, oldest first"
    assert all(e.traceback.startswith("Traceback") for e in finished.errors), "whole tracebacks"


def test_a_success_after_failures_keeps_the_failed_attempts_errors(drain, configure):
    configure(max_attempts=5)
    result = tasks.which_attempt.enqueue(fail_until=3)
    drain()
    finished = tasks.which_attempt.get_result(result.id)
    assert (finished.status, finished.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
    assert [error.exception_class for error in finished.errors] == [RuntimeError] * 2


def test_worker_ids_name_the_runner_of_each_attempt(drain, configure):
    configure(max_attempts=5)
    result = tasks.which_attempt.enqueue(fail_until=2)
    runner = drain()
    finished = tasks.which_attempt.get_result(result.id)
    assert finished.worker_ids == [runner.presence.name] * 2, "one runner ran both attempts"
    assert finished.attempts == 2, "Django counts attempts by worker_ids"
    assert runner.presence.name.split(":")[1].isdigit(), "the runner is named host:pid"


def test_started_at_is_the_first_attempts_start_and_last_attempted_at_the_lasts(drain, configure):
    configure(max_attempts=5)
    result = tasks.which_attempt.enqueue(fail_until=3)
    drain()
    finished = tasks.which_attempt.get_result(result.id)
    row = Job.objects.get(id=result.id)
    assert finished.started_at == row.attempt_history[0].started_at, "the first attempt's start"
    assert finished.last_attempted_at == row.started_at, "the last attempt's start"
    assert finished.started_at is not None
    assert finished.last_attempted_at is not None
    assert finished.finished_at is not None
    assert finished.started_at < finished.last_attempted_at < finished.finished_at


def test_task_started_fires_at_each_attempts_start_and_task_finished_once_at_the_end(
    drain, configure, heard
):
    configure(max_attempts=3)
    result = tasks.fail_each.enqueue()
    drain()
    assert heard.started == [(TaskResultStatus.RUNNING, n) for n in (1, 2, 3)], (
        "each attempt's start is told, as running, with the attempts so far"
    )
    assert [(r.id, r.status) for r in heard.finished] == [(result.id, TaskResultStatus.FAILED)], (
        "a retried attempt is not the end: finished fires once, after the last"
    )
    assert heard.states_when_finished == [State.FAILED], "sent once the failure committed"
    assert len(heard.finished[0].errors) == 3, "the finished result carries every error"


def test_task_finished_fires_once_on_success_after_the_row_is_done(drain, configure, heard):
    configure(max_attempts=3)
    result = tasks.which_attempt.enqueue(fail_until=2)
    drain()
    assert [(r.status, r.return_value) for r in heard.finished] == [
        (TaskResultStatus.SUCCESSFUL, 2)
    ]
    assert heard.states_when_finished == [State.DONE], "sent once the done committed"
    assert heard.finished[0].id == result.id
    assert len(heard.started) == 2


def test_a_task_cancelled_while_queued_finishes_failed_with_a_cancel_error(heard):
    result = tasks.add.enqueue(1, 2)
    report = cancel([result.id], by="alice")
    assert report.touched == 1
    assert [r.status for r in heard.finished] == [TaskResultStatus.FAILED], (
        "a cancel while queued is the task's end, told once"
    )
    finished = tasks.add.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED
    assert [error.exception_class for error in finished.errors] == [JobCancelled]
    assert "alice" in finished.errors[0].traceback
    assert finished.worker_ids == [], "no attempt ran"


def test_a_timed_out_attempt_is_an_error_of_class_attempt_timed_out(
    make_runner, configure, registry, heard
):
    configure(max_attempts=3, lease_seconds=1)
    tasks.RELEASE.clear()
    runner = make_runner(registry=registry)
    try:
        with freeze_time(T0) as frozen:
            result = tasks.wait_for_release.enqueue()
            assert runner.run_pass()[0] == 1, "the task was claimed"
            assert heard.first_start.wait(WAIT), "the attempt started"
            frozen.tick(timedelta(seconds=3))
            runner.run_pass()
    finally:
        tasks.RELEASE.set()
    runner.close()
    waiting = tasks.wait_for_release.get_result(result.id)
    assert waiting.status == TaskResultStatus.READY, "a timeout is retried"
    assert [error.exception_class for error in waiting.errors] == [AttemptTimedOut]
    assert "timed out" in waiting.errors[0].traceback
    assert heard.finished == [], "not the end: another attempt is due"


def reclaimable(result_id: str, runner: str) -> None:
    """Claim the task's row as a runner that then vanished: its lease ends at once."""
    store = for_database()
    [claim] = store.claim(Admission(timezone.now(), {KIND: timedelta(microseconds=1)}, 1, runner))
    assert str(claim.job.id) == result_id


def test_a_reclaimed_attempt_is_an_error_of_class_attempt_reclaimed_naming_its_runner(
    drain, configure, heard
):
    configure(max_attempts=3)
    result = tasks.add.enqueue(2, 2)
    reclaimable(result.id, "vanished-host:41")
    runner = drain()
    finished = tasks.add.get_result(result.id)
    assert (finished.status, finished.return_value) == (TaskResultStatus.SUCCESSFUL, 4)
    assert [error.exception_class for error in finished.errors] == [AttemptReclaimed]
    assert "lease expired on runner vanished-host:41" in finished.errors[0].traceback
    assert finished.worker_ids == ["vanished-host:41", runner.presence.name]
    assert len(heard.finished) == 1


def test_a_task_retired_without_running_finishes_failed_once(drain, configure, heard):
    configure(max_attempts=1)
    result = tasks.add.enqueue(2, 2)
    reclaimable(result.id, "vanished-host:41")
    drain()
    finished = tasks.add.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED, "its one attempt was spent by the lost one"
    assert [error.exception_class for error in finished.errors] == [AttemptReclaimed, JobNotRun]
    assert [r.status for r in heard.finished] == [TaskResultStatus.FAILED]
    assert heard.started == [], "it never ran"


def test_every_class_an_error_names_imports_and_is_an_exception():
    for outcome in history.Outcome:
        entry = history.record(
            attempt=1,
            started_at=None,
            ended_at=timezone.now(),
            runner="",
            outcome=outcome,
            error="x",
        )
        error = TaskError(exception_class_path=entry.exception_class_path, traceback="")
        assert issubclass(error.exception_class, history.AttemptError), outcome
