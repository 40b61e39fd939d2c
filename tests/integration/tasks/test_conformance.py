"""Django's task API to the letter: the rules Django's own `tests/tasks` and
django-tasks-db's backend tests check, held against `jobs.tasks.JobsBackend`.

Our own tests, written from the rules those suites check (none of their code
is copied); each docstring names the upstream tests it covers, as
`django:<module>.<test>` (Django 6.1's tests/tasks) or `tasks-db:<test>`
(django-tasks-db's tests/tests.py). Where our backend differs by design
(an exception is a retry under the job's attempt budget), a test sets the
budget to one attempt, the upstream backends' only one. The rules about real
processes (a worker's start, signals, `runjobs --burst`) are in
tests/acceptance/test_tasks_conformance_process.py.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.test import override_settings
from django.utils import timezone

from jobs.models import Job
from jobs.registry import Registry
from jobs.tasks import JobsBackend, TaskHandler
from tests.jobapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def drain(make_runner, configure):
    """Run every ready task job to its settle; one attempt each, as the
    upstream backends make (an exception is then the task's failure)."""
    configure(max_attempts=1)
    registry = Registry()
    registry.register(TaskHandler)

    def run() -> None:
        make_runner(registry=registry).drain()

    return run


def test_the_default_backend_is_ours_and_says_what_it_supports():
    """django:test_tasks.test_using_correct_backend, test_get_backend;
    tasks-db:test_using_correct_backend."""
    assert isinstance(task_backends["default"], JobsBackend)
    assert tasks.add.get_backend() is task_backends["default"]
    assert default_task_backend.supports_defer, "run_after becomes the job's run_at"
    assert default_task_backend.supports_get_result, "results are read from the row"
    assert default_task_backend.supports_priority
    assert default_task_backend.supports_async_task


def test_an_enqueued_task_reads_ready_with_its_arguments_and_nothing_run_yet():
    """django:test_tasks.test_enqueue_task, test_dummy_backend.test_enqueue_task;
    tasks-db:test_enqueue_task."""
    before = timezone.now()
    result = tasks.echo.enqueue(1, "two", three=[3])

    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert (result.args, result.kwargs) == ([1, "two"], {"three": [3]})
    assert result.task == tasks.echo
    assert result.backend == "default"
    assert result.attempts == 0
    assert result.errors == []
    assert result.worker_ids == []
    assert (result.started_at, result.finished_at, result.last_attempted_at) == (None, None, None)
    assert result.enqueued_at is not None
    assert result.enqueued_at >= before
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018


def test_a_task_run_by_a_runner_refreshes_to_successful_with_its_times_in_order(drain):
    """tasks-db:test_run_enqueued_task, test_refresh_result;
    django:test_immediate_backend.test_enqueue_task, test_result,
    test_dummy_backend.test_refresh_result."""
    result = tasks.add.enqueue(40, 2)
    drain()

    assert result.status == TaskResultStatus.READY, "a result object is a snapshot until refreshed"
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL  # type: ignore[comparison-overlap]  # refresh() changed it
    assert result.is_finished is True
    assert result.attempts == 1
    assert result.return_value == 42
    assert result.started_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at is not None
    assert result.finished_at >= result.started_at
    assert result.last_attempted_at is not None
    assert tasks.add.get_result(result.id) == result, "get_result reads the same row"


def test_a_failed_task_keeps_its_exception_class_and_a_traceback_ending_in_its_message(drain):
    """tasks-db:test_failing_task; django:test_immediate_backend.test_catches_exception."""
    result = tasks.fail_with_value_error.enqueue()
    drain()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert result.started_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at is not None
    assert result.finished_at >= result.started_at >= result.enqueued_at
    assert result.errors[0].exception_class is ValueError
    assert result.errors[0].traceback.endswith(
        "ValueError: This task failed due to ValueError\n"
    ), result.errors[0].traceback


def test_a_failure_is_logged_once_at_error_with_its_exception_and_traceback(drain, caplog):
    """django:test_immediate_backend.test_catches_exception (one ERROR record
    holding the message) and test_failed_logs; Django's own `task_finished`
    receiver logs the exception it finds in `sys.exc_info()`, which the
    database backend's worker sends from inside its `except`."""
    result = tasks.fail_with_value_error.enqueue()
    with caplog.at_level(logging.DEBUG, logger="django.tasks"):
        drain()

    errors = [r for r in caplog.records if r.name == "django.tasks" and r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    [record] = errors
    assert f"id={result.id}" in record.getMessage()
    assert "state=FAILED" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError), "the log carries the task's own exception"
    text = caplog.text
    assert "This task failed due to ValueError" in text, "its message is in the log"
    assert "Traceback (most recent call last)" in text, "and its traceback"
    assert "in fail_with_value_error" in text, "down to the task's own frame"


def test_started_and_finished_are_logged_for_a_success_without_a_none_or_an_error(drain, caplog):
    """django:test_immediate_backend.test_enqueue_logs,
    test_successful_task_no_none_in_logs; tasks-db:test_enqueue_logs,
    test_verbose_logging (the RUNNING and SUCCESSFUL lines)."""
    with caplog.at_level(logging.DEBUG, logger="django.tasks"):
        result = tasks.add.enqueue(1, 2)
        drain()

    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert [line.rsplit(" ", 1)[-1] for line in lines] == [
        f"backend={result.backend}",
        "state=RUNNING",
        "state=SUCCESSFUL",
    ], lines
    assert all(result.id in line for line in lines)
    assert "None" not in caplog.text
    assert not [
        r for r in caplog.records if r.name == "django.tasks" and r.levelno >= logging.ERROR
    ]


def test_a_nested_exception_is_kept_with_the_line_that_raised_it(drain):
    """tasks-db:test_complex_exception; django:test_immediate_backend.test_complex_exception."""
    result = tasks.fail_with_nested_exception.enqueue()
    drain()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback


def test_a_return_value_json_cannot_hold_fails_the_task_at_once_in_djangos_words(drain, configure):
    """tasks-db:test_complex_return_value ("is not JSON serializable", what
    Django's JSON encoder says) and django:test_immediate_backend.
    test_complex_return_value ("Unsupported type", what `normalize_json`
    says, chained as the cause). The task ran, side effects and all: it fails
    on that attempt whatever the budget, since another would only repeat them."""
    configure(max_attempts=3)  # frozen onto the job as it is queued
    result = tasks.return_a_function.enqueue()
    drain()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1, "no second attempt to repeat the task's side effects"
    assert result._return_value is None  # type: ignore[attr-defined]
    assert result.errors[0].exception_class is TypeError
    assert "Object of type function is not JSON serializable" in result.errors[0].traceback
    assert "Unsupported type" in result.errors[0].traceback


def test_a_task_that_takes_context_reads_its_own_result_and_attempt(drain):
    """django:test_immediate_backend.test_takes_context, test_context;
    tasks-db:test_takes_context, test_context."""
    result = tasks.own_result_id.enqueue()
    drain()
    result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == result.id
    counted = tasks.which_attempt.enqueue(fail_until=1)
    drain()
    assert tasks.which_attempt.get_result(counted.id).return_value == 1, "attempt 1 of 1"


@pytest.mark.parametrize("result_id", ["123", "not-a-uuid", "2b1aa7b3-5a0f-4e62-9b8c-6f1b0d0c3c1e"])
def test_a_missing_or_malformed_result_id_raises_does_not_exist(result_id):
    """tasks-db:test_get_missing_result, test_invalid_uuid;
    django:test_tasks.test_get_incorrect_result."""
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result_id)


def test_a_result_of_another_kind_of_job_is_not_a_task_result():
    """tasks-db:test_get_missing_result, applied to a row that is a job but no task."""
    from jobs import JobSpec, enqueue

    assert enqueue(JobSpec.now("test.noop", "not-a-task"))
    job_id = Job.objects.get(key="not-a-task").id
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(str(job_id))


def test_enqueue_sends_task_enqueued_with_the_result_it_returns():
    """tasks-db:test_enqueue_task (the signal);
    django:test_dummy_backend.test_enqueue_logs (the debug line)."""
    heard: list[tuple[Any, Any]] = []

    def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        heard.append((sender, task_result))

    task_enqueued.connect(on_enqueued)
    try:
        result = tasks.add.enqueue(1, 1)
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert heard == [(JobsBackend, result)]


def test_the_enqueue_writes_within_the_callers_transaction_without_waiting_for_its_commit():
    """tasks-db:test_doesnt_wait_until_transaction_commit;
    django:test_immediate_backend.test_doesnt_wait_until_transaction_commit_by_default,
    test_dummy_backend.test_doesnt_wait_until_transaction_commit_by_default."""
    with transaction.atomic():
        result = tasks.add.enqueue(2, 2)
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY, (
            "the row is there at once, inside the transaction"
        )
    assert Job.objects.filter(id=result.id).exists()


def test_a_rolled_back_enqueue_leaves_no_task():
    """The other half of the rule above: the row is the caller's transaction's."""
    queued: list[str] = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            queued.append(tasks.add.enqueue(2, 2).id)
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(queued[0])


@pytest.mark.parametrize(
    ("variant", "refusal"),
    [
        ({"priority": -101}, "priority"),
        ({"priority": 101}, "priority"),
        ({"queue_name": "not-configured"}, "not-configured"),
        ({"run_after": timezone.now().replace(tzinfo=None)}, "run_after"),
    ],
)
def test_an_invalid_task_variant_is_refused_at_enqueue_and_writes_nothing(variant, refusal):
    """django:test_tasks.test_invalid_priority, test_unknown_queue_name,
    test_naive_datetime, test_immediate_backend.test_validate_on_enqueue;
    tasks-db:test_validate_on_enqueue, test_priority_range_check."""
    with pytest.raises(InvalidTask, match=refusal):
        tasks.add.using(**variant).enqueue(1, 2)
    assert not Job.objects.filter(kind="django.task").exists()


@override_settings(TASKS={"default": {"BACKEND": "jobs.tasks.JobsBackend", "QUEUES": ["a", "b"]}})
def test_validation_at_enqueue_reads_the_backend_s_queues_as_they_are_then():
    """django:test_immediate_backend.test_validate_on_enqueue and
    tasks-db:test_validate_on_enqueue: a task built while its queue was
    allowed is refused once the backend no longer lists it."""
    with pytest.raises(InvalidTask):
        tasks.add.using(queue_name="c").enqueue(1, 2)
    assert tasks.add.using(queue_name="b").enqueue(1, 2).task.queue_name == "b"


def test_with_one_slot_tasks_run_by_priority_then_run_after_then_enqueue_order(
    make_runner, configure
):
    """tasks-db:test_run_after_priority, DBTaskResultOrderingTestCase's
    test_higher_priority_tasks_come_first,
    test_earlier_run_after_comes_first_given_same_priority and
    test_earlier_enqueued_at_comes_first_given_same_priority_and_run_after."""
    configure(max_concurrent=1, max_attempts=1)
    now = timezone.now()
    earlier, later = now - timedelta(seconds=20), now - timedelta(seconds=10)
    ids = {
        "low, earlier": tasks.add.using(priority=-5, run_after=earlier).enqueue(0, 1).id,
        "high, later": tasks.add.using(priority=5, run_after=later).enqueue(0, 2).id,
        "high, earlier": tasks.add.using(priority=5, run_after=earlier).enqueue(0, 3).id,
        "zero, later, first queued": tasks.add.using(run_after=later).enqueue(0, 4).id,
        "zero, later, second queued": tasks.add.using(run_after=later).enqueue(0, 5).id,
    }
    registry = Registry()
    registry.register(TaskHandler)
    make_runner(registry=registry).drain()

    started = {}
    for name, result_id in ids.items():
        moment = tasks.add.get_result(result_id).started_at
        assert moment is not None, f"{name} ran"
        started[name] = moment
    assert sorted(started, key=started.__getitem__) == [
        "high, earlier",
        "high, later",
        "zero, later, first queued",
        "zero, later, second queued",
        "low, earlier",
    ]
