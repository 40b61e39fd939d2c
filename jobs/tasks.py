"""A backend for Django's own tasks framework: `@task` functions run as jobs.

    TASKS = {"default": {"BACKEND": "jobs.tasks.JobsBackend"}}

`my_task.enqueue(...)` queues a job of kind `django.task` whose payload names
the task and its JSON arguments; `runjobs` runs it with the same lease,
backoff and attempt budget as any job. An exception in the task is a retry;
raise `PermanentFailure` to fail at once (as `SystemExit`, `KeyboardInterrupt`
and a return value JSON cannot hold do). `get_result(id)` reads the row, so
results are visible from every process.

Nothing here imports the models at import time: Django's tasks check imports
this module whenever `TASKS` names it, and it must be able to say that `jobs`
is missing from `INSTALLED_APPS` (`jobs.E006`) instead of failing to import.

Only functions that are registered tasks run: the backend remembers every
task built for it (as their modules import, including each installed app's
`tasks` module, which `jobs` imports at start-up) and never imports a path
taken from a row.
"""

from __future__ import annotations

import json
import socket
import traceback
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, transaction
from django.tasks import TaskContext, TaskResult, task_backends
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from jobs.handlers import Done, Failed, JobHandler, Outcome, Retry
from jobs.registry import register
from jobs.spec import JSON_MAX_DEPTH, InvalidJobSpec, JobSpec, queue_name_problem, strict_json
from jobs.storable import deeper_than
from jobs.task_rows import TASKS, finished, raised, to_result

if TYPE_CHECKING:
    from jobs.models import Job

#: The kind every task job has.
KIND = "django.task"


class PermanentFailure(Exception):
    """Raise from a task to fail it at once, without spending further attempts."""


class JobsBackend(BaseTaskBackend):
    """Django tasks as durable jobs.

    Supports: `run_after` (it becomes `run_at`), `priority` (the job's: higher
    is claimed first), `queue_name` (the job's queue, which `runjobs --queue`
    selects), async task functions (run to completion on the worker thread),
    and results from any process.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE", DEFAULT_DB_ALIAS)

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        if problem := queue_name_problem(task.queue_name):
            # Django's own check lets any name in QUEUES through; the job's
            # queue column (and `runjobs --queue`) takes fewer.
            raise InvalidTask(f"{task.module_path}: {problem}")
        TASKS[task.module_path] = task

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        if not apps.is_installed("jobs"):
            return [
                checks.Error(
                    "jobs.tasks.JobsBackend queues tasks in the jobs app's table, but "
                    "jobs is not in INSTALLED_APPS.",
                    hint='Add "jobs" to INSTALLED_APPS, then run migrate.',
                    obj=f"TASKS[{self.alias!r}]",
                    id="jobs.E006",
                )
            ]
        return []

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        from jobs.queue import enqueue

        self.validate_task(task)
        if deeper_than([list(args), dict(kwargs)], JSON_MAX_DEPTH):
            # Django's `normalize_json` would recurse into them without bound.
            raise InvalidJobSpec(
                f"{task.module_path}: payload is nested more than {JSON_MAX_DEPTH} levels deep "
                "(the task's arguments, inside the job's payload)"
            )
        try:
            payload = payload_for(task, args, kwargs, self.alias)
        except (TypeError, ValueError) as error:
            # Django's own exception and words, as its backends raise them
            # (a TypeError, "Unsupported type: ..."): code written for
            # Django's tasks catches that. The note says which call.
            error.add_note(f"{task.module_path}: task arguments must be JSON")
            raise
        job_id = uuid.uuid4()
        spec = JobSpec(
            kind=KIND,
            key=str(job_id),
            payload=payload,
            run_at=_run_at(task),
            queue=task.queue_name,
            # Django lets a whole float through (5.0); the column holds integers.
            priority=int(task.priority),
        )
        enqueue(spec, using=self.database, job_id=job_id)
        result = self.get_result(str(job_id))
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        from jobs.models import Job

        try:
            job = Job.objects.using(self.database).get(id=uuid.UUID(str(result_id)), kind=KIND)
        except (Job.DoesNotExist, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        return to_result(job, self.alias)


def payload_for(task: Task[Any, Any], args: Any, kwargs: Any, alias: str) -> dict[str, Any]:
    """The payload of a job that runs `task(*args, **kwargs)` through the
    backend `alias`: what `TaskHandler` calls and `to_result` reads back.
    Raises TypeError or ValueError for arguments that are not JSON."""
    return {
        "task": task.module_path,
        "backend": alias,
        "queue_name": task.queue_name,
        "priority": task.priority,
        "run_after": None if task.run_after is None else task.run_after.isoformat(),
        "takes_context": task.takes_context,
        "args": normalize_json(list(args)),
        "kwargs": normalize_json(dict(kwargs)),
    }


def _run_at(task: Task[Any, Any]) -> datetime:
    """When the task's job may run, as this project's rows hold time.

    Django's own rule for `run_after`: aware when `USE_TZ` is on (Django's
    `validate_task` refuses a naive one), and under `USE_TZ = False` naive,
    meaning `TIME_ZONE`, an aware one being turned into that zone's wall time.
    """
    if task.run_after is None:
        return timezone.now()
    if not settings.USE_TZ and timezone.is_aware(task.run_after):
        return timezone.make_naive(task.run_after)
    return task.run_after


@register
class TaskHandler(JobHandler):
    """Runs `django.task` jobs: the registered task named in the payload."""

    kind = KIND

    def run(self, job: Job) -> Outcome:
        payload = job.payload
        task = TASKS.get(payload.get("task", ""))
        if task is None:
            # Perhaps a runner from before the deploy that added the task.
            return Retry(f"{payload.get('task')!r} is not a registered task in this runner")
        alias = payload.get("backend", task.backend)
        result = to_result(job, alias)
        task_started.send(type(task_backends[alias]), task_result=result)
        args, kwargs = payload["args"], payload["kwargs"]
        try:
            if payload.get("takes_context"):
                value = task.call(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
        except BaseException as error:
            # Every BaseException, as the executor takes them (see
            # `Executor.run`): a `sys.exit()` in a task is its failure, not
            # the runner's, and on this worker thread nothing else raises one.
            # One that is not an Exception (SystemExit, KeyboardInterrupt) is
            # the task asking to stop, not a blip: it fails at once, as
            # Django's DatabaseBackend fails it. No `task_finished` yet: the
            # result is terminal only once the row is retired (`abandon`).
            final = isinstance(error, PermanentFailure) or not isinstance(error, Exception)
            return _failure(job, error, final=final)
        try:
            stored = _as_json(value)
        except (TypeError, ValueError, PermanentFailure) as error:
            # The task ran, side effects and all: another attempt would run
            # them again only to return a value of the same kind.
            return _failure(job, error, final=True)
        return Done(result={"return_value": stored, "host": socket.gethostname()})

    def completed(self, job: Job) -> None:
        """The `Done` has committed: the result is terminal and successful."""
        finished(job)

    def abandon(self, job: Job, reason: str) -> None:
        """Retired (failed after its last attempt, cancelled, or retired without
        running): `task_finished` once the retirement commits, with the row as
        it then reads."""
        using = job._state.db or DEFAULT_DB_ALIAS
        transaction.on_commit(lambda: finished(job, reread=True), using=using)


def _as_json(value: Any) -> Any:
    """A task's return value as its row stores it. Raises TypeError with the
    words Django's JSON encoder uses ("Object of type set is not JSON
    serializable", what code written for Django's database backend expects),
    its own `normalize_json` refusal chained as the cause; PermanentFailure
    for a value nested deeper than any database here stores."""
    if deeper_than(value, JSON_MAX_DEPTH - 1):  # kept inside the result's own object
        # Refused before `normalize_json`, which would recurse without bound.
        raise PermanentFailure(
            f"the task returned a value nested more than {JSON_MAX_DEPTH - 1} levels "
            "deep, which no database here stores"
        )
    try:
        stored = normalize_json(value)
    except TypeError as error:
        raise TypeError(_not_serializable(value)) from error
    strict_json(stored)
    return stored


def _not_serializable(value: Any) -> str:
    """What `json.dumps` says of `value`'s first part JSON has no type for,
    reading containers as `normalize_json` does."""

    def default(part: Any) -> Any:
        if isinstance(part, bytes | Mapping):
            return dict(part) if isinstance(part, Mapping) else ""
        if isinstance(part, Sequence):
            return list(part)
        raise TypeError(f"Object of type {type(part).__name__} is not JSON serializable")

    try:
        json.dumps(value, default=default)
    except (TypeError, ValueError) as error:
        return str(error)
    return f"Object of type {type(value).__name__} is not JSON serializable"


def _failure(job: Job, error: BaseException, *, final: bool) -> Retry | Failed:
    """The outcome of an attempt that raised `error`: its traceback as the
    reason, `Failed` when `final`. An attempt that may be the task's last
    keeps `error` for `task_finished` (`jobs.task_rows.raised`)."""
    described = "".join(traceback.format_exception(error))
    if final or job.attempts >= job.max_attempts:
        raised.keep(job, error)
    if final:
        return Failed(described, exception=error)
    return Retry(described, exception=error)
