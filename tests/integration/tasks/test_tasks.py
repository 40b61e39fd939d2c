"""Django's tasks framework on `jobs`: `@task` functions enqueued as rows, run by a
runner, with results read back from the row."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.core import checks
from django.tasks import TaskResultStatus, task_backends
from django.tasks.backends.dummy import DummyBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.test import override_settings
from django.utils import timezone
from freezegun import freeze_time

from jobs.models import Job, State
from jobs.registry import Registry
from jobs.spec import JSON_MAX_DEPTH, InvalidJobSpec
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
    """Each flag is a promise Django's callers rely on."""
    backend = task_backends["default"]
    assert isinstance(backend, JobsBackend)
    assert backend.supports_defer
    assert backend.supports_async_task
    assert backend.supports_get_result
    assert backend.supports_priority


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


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((datetime(2030, 1, 1, tzinfo=UTC),), {}),
        ((), {"value": {1, 2}}),
        ((object(),), {}),
        ((b"\xff",), {}),
    ],
    ids=["a datetime", "a set", "an object", "bytes that are not UTF-8"],
)
def test_arguments_that_are_not_json_raise_what_djangos_backends_raise_and_write_nothing(
    args, kwargs
):
    """Django's backends raise TypeError ("Unsupported type: ...") for an argument
    JSON has no type for (ValueError for bytes that are not text); code written
    for Django's tasks catches those, so ours must raise the same."""
    with pytest.raises((TypeError, ValueError)) as django_raised:
        DummyBackend("dummy", {}).enqueue(tasks.echo, args, kwargs)
    with pytest.raises((TypeError, ValueError)) as we_raised:
        tasks.echo.enqueue(*args, **kwargs)
    assert type(we_raised.value) is type(django_raised.value), "Django's exception class"
    assert str(we_raised.value) == str(django_raised.value), "Django's words"
    assert not Job.objects.exists(), "a refused enqueue writes no row"


def test_arguments_json_holds_but_a_row_cannot_are_refused_as_invalid_and_write_nothing():
    """Django's backends keep NaN and integer keys as they are; a row's JSON cannot,
    and the task would read back something else, so enqueue refuses them."""
    with pytest.raises(InvalidJobSpec):
        tasks.echo.enqueue(float("nan"))
    with pytest.raises(InvalidJobSpec, match="round trip"):
        tasks.echo.enqueue(value={1: "one"})
    assert not Job.objects.exists(), "a refused enqueue writes no row"


@pytest.mark.parametrize("depth", [30, 5_000], ids=["past-the-bound", "5000-levels"])
def test_arguments_nested_past_the_bound_are_refused_as_invalid_and_write_nothing(depth):
    """Inside the payload, an argument sits two levels down: 30 levels of it is 32."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    with pytest.raises(InvalidJobSpec, match=f"nested more than {JSON_MAX_DEPTH} levels deep"):
        tasks.echo.enqueue(value)
    assert not Job.objects.exists(), "a refused enqueue writes no row"


def test_a_return_value_nested_past_the_bound_fails_the_task_at_once(drain):
    """`echo` returns its arguments one level down, inside the result's own object:
    arguments as deep as a payload holds come back too deep to store."""
    value: Any = []
    for _ in range(JSON_MAX_DEPTH - 3):
        value = [value]
    result = tasks.echo.enqueue(value)
    drain()
    finished = tasks.echo.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED, "the task fails rather than retry"
    assert "nested more than" in finished.errors[-1].traceback
    assert Job.objects.get().attempts == 1, "on its one attempt"


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


def test_a_tasks_priority_becomes_its_jobs_priority():
    result = tasks.add.using(priority=10).enqueue(1, 1)
    assert Job.objects.get(pk=uuid.UUID(result.id)).priority == 10
    assert tasks.add.get_result(result.id).task.priority == 10
    # Django lets a whole float by, typed int or not.
    whole = tasks.add.using(priority=-5.0).enqueue(1, 1)  # type: ignore[arg-type]
    assert Job.objects.get(pk=uuid.UUID(whole.id)).priority == -5


def test_a_priority_outside_djangos_range_is_refused_and_writes_nothing():
    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=101).enqueue(1, 1)
    assert not Job.objects.exists()


def test_with_one_slot_the_higher_priority_task_runs_first(make_runner, configure):
    """Django's Task API: a higher `priority` runs first."""
    configure(max_concurrent=1)
    low = tasks.add.using(priority=-10).enqueue(1, 1)
    high = tasks.add.using(priority=10).enqueue(2, 2)
    registry = Registry()
    registry.register(TaskHandler)
    runner = make_runner(registry=registry)

    assert runner.run_pass()[0] == 1, "one slot, one claim"
    assert runner.finish(10)

    assert tasks.add.get_result(high.id).status == TaskResultStatus.SUCCESSFUL
    assert tasks.add.get_result(low.id).status == TaskResultStatus.READY


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


@pytest.mark.parametrize(
    ("how", "raised"),
    [("exit", "builtins.SystemExit"), ("interrupt", "builtins.KeyboardInterrupt")],
)
def test_a_task_that_exits_or_interrupts_itself_fails_at_once_with_its_traceback(
    drain, configure, how, raised
):
    """`sys.exit()` in a task (or a library's `exit()`), or a KeyboardInterrupt it
    raises, is the task's failure, not the runner's, and not a blip worth
    another attempt: the task asked to stop. It fails on its one attempt, as
    Django's database backend fails it (django-tasks-db's
    test_system_exit_task and test_keyboard_interrupt_task)."""
    configure(max_attempts=3)
    result = tasks.escape.enqueue(how)
    drain()
    finished = tasks.escape.get_result(result.id)
    assert finished.status == TaskResultStatus.FAILED
    assert finished.attempts == 1, "no further attempt is spent on a task that asked to stop"
    assert finished.errors[0].exception_class_path == raised
    assert "Traceback" in finished.errors[0].traceback


def test_get_result_describes_the_task_as_enqueued_not_a_variant_built_since():
    """`using()` builds a new Task, which Django validates and so our backend sees;
    a result read later must still describe the task its enqueue queued."""
    backend = task_backends["default"]
    later = timezone.now() + timedelta(hours=1)
    plain = tasks.add.enqueue(1, 1)
    deferred = tasks.add.using(run_after=later).enqueue(2, 2)
    tasks.add.using(run_after=later + timedelta(hours=1))  # built, never enqueued

    assert backend.get_result(plain.id) == plain, "the plain enqueue reads back equal"
    assert backend.get_result(plain.id).task.run_after is None
    assert backend.get_result(deferred.id) == deferred, "the deferred enqueue reads back equal"
    assert backend.get_result(deferred.id).task.run_after == later
    assert tasks.add.get_result(deferred.id).task == tasks.add.using(run_after=later)


def test_with_use_tz_false_a_task_enqueues_and_runs(settings, drain):
    """Django supports `USE_TZ = False`; a task enqueue must not demand an aware time."""
    settings.USE_TZ = False
    settings.TIME_ZONE = "Asia/Tokyo"
    result = tasks.add.enqueue(2, 3)
    assert result.enqueued_at is not None
    assert timezone.is_naive(result.enqueued_at), "times read back as Django keeps them"
    drain()
    assert tasks.add.get_result(result.id).return_value == 5


@pytest.mark.parametrize("given", ["naive", "aware"])
def test_with_use_tz_false_run_after_is_the_instant_it_names_in_time_zone(
    settings, make_runner, configure, given
):
    """Under `USE_TZ = False` Django reads a naive datetime as a wall time in
    `TIME_ZONE` (and allows an aware one): the task runs at that instant, not
    hours off. Tokyo is nine hours from UTC, so a mix-up cannot pass."""
    settings.USE_TZ = False
    settings.TIME_ZONE = "Asia/Tokyo"
    configure(retry_base_seconds=0, retry_max_seconds=0)
    registry = Registry()
    registry.register(TaskHandler)
    wall = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    run_after = wall if given == "naive" else timezone.make_aware(wall).astimezone(UTC)
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    assert Job.objects.get(pk=uuid.UUID(result.id)).run_at == wall, "kept as Tokyo's wall time"

    make_runner(registry=registry, clock=lambda: wall - timedelta(seconds=1)).drain()
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY, "not a second early"
    make_runner(registry=registry, clock=lambda: wall).drain()
    assert tasks.add.get_result(result.id).return_value == 2, "run at the instant named"


def test_the_backend_checks_that_the_jobs_app_is_installed():
    """Without the app there is no table: every enqueue would fail at run time."""
    backend = task_backends["default"]
    assert backend.check() == [], "installed, the backend has nothing to say"
    without_jobs = [app for app in django_settings.INSTALLED_APPS if not app.startswith("jobs")]
    with override_settings(INSTALLED_APPS=without_jobs):
        found = backend.check()
    assert [message.id for message in found] == ["jobs.E006"]
    assert found[0].level == checks.ERROR
    assert found[0].hint is not None
    assert '"jobs"' in found[0].hint, "the hint says what to add to INSTALLED_APPS"
