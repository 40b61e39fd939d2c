"""A task as its job row holds it: the registered tasks a row may name, the
`TaskResult` a row describes, and `task_finished` when a row becomes terminal.

Split from `jobs.tasks` (the backend and the handler) as the part both read:
the backend's `get_result` and the handler's `task_started` describe the same
row alike. Nothing here imports the models at import time (see `jobs.tasks`).
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.tasks import TaskResult, TaskResultStatus, task_backends
from django.tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_finished

from jobs import history
from jobs.history_actions import is_action

if TYPE_CHECKING:
    from jobs.models import Job

#: Every task built for a JobsBackend, by module path: the only functions a
#: runner will call.
TASKS: dict[str, Task[Any, Any]] = {}


#: A row's state (`jobs.models.State`, by value) as Django names a result's status.
_STATUS = {
    "queued": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


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
    task = TASKS.get(payload["task"])
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


class _Raised:
    """The exceptions of attempts that may be their task's last, until the
    retirement's `task_finished` (a moment later, on another thread) sends
    them as Django's receivers expect: inside the `except` that caught them,
    so that `django.tasks` logs the failure with its exception and traceback
    as its own backends do. A few are kept at most (an exception holds its
    frames); one whose retirement happens elsewhere (an operator's retry,
    another runner) is dropped with the oldest."""

    #: The most kept at once.
    MOST = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, int], BaseException] = {}

    def keep(self, job: Job, error: BaseException) -> None:
        with self._lock:
            self._kept[(str(job.id), job.attempts)] = error
            while len(self._kept) > self.MOST:
                del self._kept[next(iter(self._kept))]

    def take(self, job: Job) -> BaseException | None:
        with self._lock:
            return self._kept.pop((str(job.id), job.attempts), None)


raised = _Raised()


def finished(job: Job, *, reread: bool = False) -> None:
    """Send `task_finished` for `job`, a task's row that has just become terminal;
    a failure inside the `except` of the exception its last attempt raised,
    when this process caught it (`_Raised`)."""
    from jobs.models import Job as JobRow

    payload = job.payload
    task = TASKS.get(payload.get("task", ""))
    if task is None:
        return  # not a task of this process: nobody here listens for it
    alias = payload.get("backend", task.backend)
    if reread:
        job = JobRow.objects.using(job._state.db).get(id=job.id)
    sender, result = type(task_backends[alias]), to_result(job, alias)
    error = raised.take(job)
    if error is None or result.status != TaskResultStatus.FAILED:
        task_finished.send(sender, task_result=result)
        return
    raised_in_task = error.__traceback__
    try:
        raise error
    except BaseException:
        error.__traceback__ = raised_in_task  # the task's frames, not this one
        task_finished.send(sender, task_result=result)
