"""A backend for Django's own tasks framework: `@task` functions run as jobs.

    TASKS = {"default": {"BACKEND": "jobs.tasks.JobsBackend"}}

`my_task.enqueue(...)` queues a job of kind `django.task` whose payload names
the task and its JSON arguments; `runjobs` runs it with the same lease,
backoff and attempt budget as any job. An exception in the task is a retry;
raise `PermanentFailure` to fail at once. `get_result(id)` reads the row, so
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

import dataclasses
import socket
import traceback
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, transaction
from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from jobs import history
from jobs.handlers import Done, Failed, JobHandler, Outcome, Retry
from jobs.history_actions import is_action
from jobs.registry import register
from jobs.spec import JSON_MAX_DEPTH, InvalidJobSpec, JobSpec, queue_name_problem, strict_json
from jobs.storable import deeper_than

if TYPE_CHECKING:
    from jobs.models import Job

#: The kind every task job has.
KIND = "django.task"

#: Every task built for a JobsBackend, by module path: the only functions a
#: runner will call.
_TASKS: dict[str, Task[Any, Any]] = {}


class PermanentFailure(Exception):
    """Raise from a task to fail it at once, without spending further attempts."""


#: A row's state (`jobs.models.State`, by value) as Django names a result's status.
_STATUS = {
    "queued": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


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
        _TASKS[task.module_path] = task

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


def to_result(job: Job, alias: str) -> TaskResult[Any, Any]:
    """The `TaskResult` that a task job's row describes, its attempt record
    (`Job.errors`, `jobs.history`) giving the errors and the workers.

    `errors`: one `TaskError` per attempt that did not succeed, oldest first,
    with the exception's class path and traceback (a timeout, a reclaim, a
    cancel name classes of `jobs.history`). `worker_ids`: the runner of each
    attempt, oldest first, the current or last one from `Job.claimed_by`.
    `started_at` is the first attempt's start, `last_attempted_at` the last's.
    A job with more than `jobs.history.MAX_ENTRIES` failed attempts keeps the
    newest: its errors and workers start there.
    """
    payload = job.payload
    # An operator's Retry or Run now is on the record, but is no task error.
    entries = [entry for entry in job.attempt_history if not is_action(entry)]
    workers = history.runners(entries)
    numbered = [entry for entry in entries if entry.attempt is not None]
    current = job.attempts > 0 and (not numbered or numbered[-1].attempt != job.attempts)
    if current:
        workers.append(job.claimed_by or "")
    first = next((entry.started_at for entry in numbered if entry.started_at), None)
    result: TaskResult[Any, Any] = TaskResult(
        task=_enqueued_task(job),
        id=str(job.id),
        status=_STATUS[job.state],
        enqueued_at=job.created_at,
        started_at=first or job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=payload["args"],
        kwargs=payload["kwargs"],
        backend=alias,
        errors=[
            TaskError(
                exception_class_path=entry.exception_class_path,
                traceback=entry.traceback or entry.error,
            )
            for entry in entries
        ],
        worker_ids=workers,
    )
    if job.state == "done":
        object.__setattr__(result, "_return_value", (job.result or {}).get("return_value"))
    return result


def _enqueued_task(job: Job) -> Task[Any, Any]:
    """The task as it was enqueued: its function, with the `using()` options
    the payload kept.

    Not the registered task as it stands: every variant `using()` builds
    passes `validate_task` and so replaces it there, and a result read after
    one was built would describe that variant (and compare unequal to the
    result its enqueue returned). Rows queued before the payload kept
    these options read as the decorator's defaults.
    """
    payload = job.payload
    task = _TASKS.get(payload["task"])
    if task is None:
        raise TaskResultDoesNotExist(
            f"{job.id} is a result of {payload['task']}, which is not a task in this process"
        )
    run_after = payload.get("run_after")
    enqueued = {
        "priority": payload.get("priority", DEFAULT_TASK_PRIORITY),
        "queue_name": payload.get("queue_name", task.queue_name),
        "run_after": None if run_after is None else datetime.fromisoformat(run_after),
        "backend": payload.get("backend", task.backend),
    }
    if all(getattr(task, name) == value for name, value in enqueued.items()):
        return task  # the common case: no variant, and nothing to build
    return dataclasses.replace(task, **enqueued)


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
        task_started.send(type(task_backends[alias]), task_result=result)
        args, kwargs = payload["args"], payload["kwargs"]
        try:
            if payload.get("takes_context"):
                value = task.call(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            if deeper_than(value, JSON_MAX_DEPTH - 1):  # kept inside the result's own object
                # Refused before `normalize_json`, which would recurse without bound.
                raise PermanentFailure(
                    f"the task returned a value nested more than {JSON_MAX_DEPTH - 1} levels "
                    "deep, which no database here stores"
                )
            value = normalize_json(value)
            strict_json(value)
        except BaseException as error:
            # Every BaseException, as the executor takes them (see
            # `Executor.run`): a `sys.exit()` in a task is its failure, not
            # the runner's, and on this worker thread nothing else raises one.
            # No `task_finished` yet: the result is terminal only once the
            # row is retired (`abandon`), not while another attempt is due.
            described = "".join(traceback.format_exception(error))
            if isinstance(error, PermanentFailure):
                return Failed(described, exception=error)
            return Retry(described, exception=error)
        return Done(result={"return_value": value, "host": socket.gethostname()})

    def completed(self, job: Job) -> None:
        """The `Done` has committed: the result is terminal and successful."""
        _finished(job)

    def abandon(self, job: Job, reason: str) -> None:
        """Retired (failed after its last attempt, cancelled, or retired without
        running): `task_finished` once the retirement commits, with the row as
        it then reads."""
        using = job._state.db or DEFAULT_DB_ALIAS
        transaction.on_commit(lambda: _finished(job, reread=True), using=using)


def _finished(job: Job, *, reread: bool = False) -> None:
    """Send `task_finished` for `job`, a task's row that has just become terminal."""
    from jobs.models import Job as JobRow

    payload = job.payload
    task = _TASKS.get(payload.get("task", ""))
    if task is None:
        return  # not a task of this process: nobody here listens for it
    alias = payload.get("backend", task.backend)
    if reread:
        job = JobRow.objects.using(job._state.db).get(id=job.id)
    task_finished.send(type(task_backends[alias]), task_result=to_result(job, alias))
