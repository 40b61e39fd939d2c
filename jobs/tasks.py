"""A backend for Django's own tasks framework: `@task` functions run as jobs.

    TASKS = {"default": {"BACKEND": "jobs.tasks.JobsBackend"}}

`my_task.enqueue(...)` queues a job of kind `django.task` whose payload names
the task and its JSON arguments; `runjobs` runs it with the same lease,
backoff and attempt budget as any job. An exception in the task is a retry;
raise `PermanentFailure` to fail at once. `get_result(id)` reads the row, so
results are visible from every process.

Only functions that are registered tasks run: the backend remembers every
task built for it (as their modules import, including each installed app's
`tasks` module, which `jobs` imports at start-up) and never imports a path
taken from a row.
"""

from __future__ import annotations

import socket
import traceback
import uuid
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task, TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils.json import normalize_json

from jobs.handlers import Done, Failed, JobHandler, Outcome, Retry
from jobs.models import Job, State
from jobs.queue import enqueue
from jobs.registry import register
from jobs.spec import InvalidJobSpec, JobSpec, strict_json

#: The kind every task job has.
KIND = "django.task"

#: Every task built for a JobsBackend, by module path: the only functions a
#: runner will call.
_TASKS: dict[str, Task[Any, Any]] = {}


class PermanentFailure(Exception):
    """Raise from a task to fail it at once, without spending further attempts."""


_STATUS = {
    State.QUEUED: TaskResultStatus.READY,
    State.RUNNING: TaskResultStatus.RUNNING,
    State.DONE: TaskResultStatus.SUCCESSFUL,
    State.FAILED: TaskResultStatus.FAILED,
    State.CANCELLED: TaskResultStatus.FAILED,
}


class JobsBackend(BaseTaskBackend):
    """Django tasks as durable jobs.

    Supports: `run_after` (it becomes `run_at`), async task functions (run to
    completion on the worker thread), and results from any process. Not
    priority: jobs run in `run_at` order.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE", DEFAULT_DB_ALIAS)

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        _TASKS[task.module_path] = task

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        self.validate_task(task)
        try:
            args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        except (TypeError, ValueError) as error:
            raise InvalidJobSpec(f"task arguments must be JSON round-trippable: {error}") from error
        payload = {
            "task": task.module_path,
            "backend": self.alias,
            "queue_name": task.queue_name,
            "takes_context": task.takes_context,
            "args": args,
            "kwargs": kwargs,
        }
        job_id = uuid.uuid4()
        spec = JobSpec.now(KIND, str(job_id)).with_payload(payload)
        if task.run_after is not None:
            spec = JobSpec(kind=KIND, key=str(job_id), payload=payload, run_at=task.run_after)
        enqueue(spec, using=self.database, job_id=job_id)
        result = self.get_result(str(job_id))
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            job = Job.objects.using(self.database).get(id=uuid.UUID(str(result_id)), kind=KIND)
        except (Job.DoesNotExist, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        return to_result(job, self.alias)


def to_result(job: Job, alias: str) -> TaskResult[Any, Any]:
    """The `TaskResult` that a task job's row describes."""
    payload = job.payload
    task = _TASKS.get(payload["task"])
    if task is None:
        raise TaskResultDoesNotExist(
            f"{job.id} is a result of {payload['task']}, which is not a task in this process"
        )
    failed = job.state in (State.FAILED, State.CANCELLED) or (
        job.state == State.QUEUED and job.attempts > 0
    )
    errors = [_error(job.last_error)] if failed and job.last_error else []
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=str(job.id),
        status=_STATUS[State(job.state)],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=payload["args"],
        kwargs=payload["kwargs"],
        backend=alias,
        errors=errors,
        # One entry per attempt so far; attempts are counted at claim.
        worker_ids=[f"attempt-{n}" for n in range(1, job.attempts + 1)],
    )
    if job.state == State.DONE:
        object.__setattr__(result, "_return_value", (job.result or {}).get("return_value"))
    return result


def _error(last_error: str) -> TaskError:
    """Split what `TaskHandler` wrote: the exception's class path, then its traceback.

    The runner may have put words in front of the first line when it retired
    the job ("gave up after 3 of 3 attempts: builtins.ValueError"); a class
    path has no spaces, so it is the first line's last word.
    """
    first, _, text = last_error.partition("\n")
    return TaskError(exception_class_path=first.rsplit(" ", 1)[-1], traceback=text)


@register
class TaskHandler(JobHandler):
    """Runs `django.task` jobs: the registered task named in the payload."""

    kind = KIND

    def run(self, job: Job) -> Outcome:
        payload = job.payload
        task = _TASKS.get(payload.get("task", ""))
        if task is None:
            # Perhaps a runner from before the deploy that added the task.
            return Retry(f"{payload.get('task')!r} is not a registered task in this runner")
        alias = payload.get("backend", task.backend)
        result = to_result(job, alias)
        backend = type(task_backends[alias])
        object.__setattr__(result, "status", TaskResultStatus.RUNNING)
        task_started.send(backend, task_result=result)
        args, kwargs = payload["args"], payload["kwargs"]
        try:
            if payload.get("takes_context"):
                value = task.call(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            value = normalize_json(value)
            strict_json(value)
        except Exception as error:
            described = f"{type(error).__module__}.{type(error).__qualname__}\n"
            described += "".join(traceback.format_exception(error))
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
            task_finished.send(backend, task_result=result)
            if isinstance(error, PermanentFailure):
                return Failed(described)
            return Retry(described)
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "_return_value", value)
        task_finished.send(backend, task_result=result)
        return Done(result={"return_value": value, "host": socket.gethostname()})
