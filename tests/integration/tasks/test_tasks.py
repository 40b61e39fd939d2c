"""Django's tasks framework on `jobs`: `@task` functions enqueued as rows, run by a
runner, with results read back from the row."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils import timezone
from freezegun import freeze_time

from jobs.models import Job, State
from jobs.registry import Registry
from jobs.spec import InvalidJobSpec
from jobs.tasks import KIND, JobsBackend, TaskHandler
from tests.jobapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def drain(make_runner, configure):
    """Run every ready task job to its settle, with immediate retries."""
    configure(retry_base_seconds=0, retry_max_seconds=0)
    registry = Registry()
    registry.register(TaskHandler)

    def run() -> None:
        make_runner(registry=registry).drain()

    return run


def test_the_backend_declares_what_it_supports():
    """Each flag is a promise Django's callers rely on; priority is not one we keep."""
    backend = task_backends["default"]
    assert isinstance(backend, JobsBackend)
    assert backend.supports_defer
    assert backend.supports_async_task
    assert backend.supports_get_result
    assert not backend.supports_priority


def test_an_enqueued_task_is_a_ready_job_row():
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    job = Job.objects.get(pk=uuid.UUID(result.id))
    assert (job.kind, job.state) == (KIND, State.QUEUED)
    assert job.payload["task"] == "tests.jobapp.tasks.add"
    assert job.payload["args"] == [2, 3]
    assert result.enqueued_at == job.created_at


def test_a_task_runs_under_the_runner_and_its_return_value_is_kept(drain):
    result = tasks.add.enqueue(2, 3)
    drain()
    finished = tasks.add.get_result(result.id)
    assert finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == 5
    assert finished.finished_at is not None
    assert finished.attempts == 1
    result.refresh()
    assert result.return_value == 5, "refresh reads the row again"


def test_arguments_round_trip_as_json(drain):
    result = tasks.echo.enqueue(1, (2, 3), name="x", nested={"a": [1]})
    drain()
    value = tasks.echo.get_result(result.id).return_value
    assert value == {"args": [1, [2, 3]], "kwargs": {"name": "x", "nested": {"a": [1]}}}


def test_arguments_that_are_not_json_fail_the_enqueue_and_write_nothing():
    with pytest.raises(InvalidJobSpec, match="JSON round-trippable"):
        tasks.echo.enqueue(timezone.now())
    with pytest.raises(InvalidJobSpec, match="JSON round-trippable"):
        tasks.echo.enqueue(value={1, 2})
    assert not Job.objects.exists(), "a refused enqueue writes no row"


def test_an_exception_is_a_retry_under_the_same_budget_then_a_failure(drain, configure):
    configure(max_attempts=3)
    result = tasks.explode.enqueue("boom")
    drain()
    finished = tasks.explode.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED
    assert finished.attempts == 3, "every attempt of the budget was spent"
    assert finished.errors[0].exception_class_path == "builtins.ValueError"
    assert "boom" in finished.errors[0].traceback
    assert finished.errors[0].exception_class is ValueError


def test_a_task_in_backoff_reads_as_ready_again_with_its_error(make_runner, configure):
    configure(retry_base_seconds=60, max_attempts=3)
    registry = Registry()
    registry.register(TaskHandler)
    result = tasks.explode.enqueue("transient")
    make_runner(registry=registry).drain()
    waiting = tasks.explode.get_result(result.id)
    assert waiting.status == TaskResultStatus.READY, "a retry pending is ready to run again"
    assert waiting.attempts == 1
    assert "transient" in waiting.errors[0].traceback


def test_a_permanent_failure_fails_at_once(drain, configure):
    configure(max_attempts=5)
    result = tasks.refuse.enqueue("no such thing")
    drain()
    finished = tasks.refuse.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED
    assert finished.attempts == 1, "a permanent failure spends no further attempts"
    assert finished.errors[0].exception_class_path == "jobs.tasks.PermanentFailure"


def test_takes_context_passes_the_attempt_number(drain, configure):
    configure(max_attempts=5)
    result = tasks.which_attempt.enqueue(fail_until=3)
    drain()
    finished = tasks.which_attempt.get_result(result.id)
    assert finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == 3, "the context's attempt is the job's attempt count"


def test_an_async_task_runs(drain):
    result = tasks.async_double.enqueue(21)
    drain()
    value: object = tasks.async_double.get_result(result.id).return_value
    assert value == 42, "the coroutine ran to completion on the worker"


def test_run_after_becomes_run_at_and_the_task_waits_for_it(drain):
    later = timezone.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=later).enqueue(1, 1)
    assert Job.objects.get(pk=uuid.UUID(result.id)).run_at == later
    drain()
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY, "not before run_after"
    with freeze_time(later + timedelta(seconds=1)):
        drain()
        assert tasks.add.get_result(result.id).return_value == 2


def test_priority_is_refused_because_it_is_not_supported():
    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=10)


def test_aenqueue_and_aget_result_work_from_async_code(drain):
    result = async_to_sync(tasks.add.aenqueue)(4, 5)
    drain()
    fetched = async_to_sync(tasks.add.aget_result)(result.id)
    assert fetched.return_value == 9


def test_get_result_of_an_unknown_id_raises_does_not_exist():
    backend = task_backends["default"]
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(str(uuid.uuid4()))
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("not-a-uuid")


def test_a_row_naming_a_function_that_is_not_a_registered_task_is_never_run(drain, configure):
    """The path comes from a row; importing and calling it would let whoever can
    write a row run any function."""
    configure(max_attempts=1)
    Job.objects.create(
        kind=KIND,
        key="forged",
        max_attempts=1,
        run_at=timezone.now(),
        payload={"task": "os.system", "args": ["touch /tmp/pwned"], "kwargs": {}},
    )
    drain()
    job = Job.objects.get(key="forged")
    assert job.state == State.FAILED
    assert "not a registered task" in job.last_error
