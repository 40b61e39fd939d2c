"""Workflows on the lifecycle hooks (`jobs.lifecycle`): the one place where a
job's life meets its workflow, so the runner never knows workflows exist.

A step is told apart by its `workflow_id`, a column the claim reads back: a
plain job (NULL) costs each attempt one attribute read and no statement.
Before a step runs, the hook answers for it, so its `Done` is settled on its
own with `after_settle` in the settle's transaction; there, and in every
retirement's, the steps waiting for it are moved on (`release.settled`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from jobs import lifecycle
from jobs.models import Job
from jobs.store import Store
from jobs.workflows import release

#: The verdict on every step: run it, and see its final settle.
_RUN = lifecycle.Verdict(reason="a workflow's step")


class WorkflowHook(lifecycle.Hook):
    """A workflow's steps, told apart by their `workflow_id`."""

    def before_run(
        self, job: Job, clock: Callable[[], datetime], using: str
    ) -> lifecycle.Verdict | None:
        return None if job.workflow_id is None else _RUN

    def after_settle(
        self, store: Store, job: Job, now: datetime, state: str, started: datetime | None
    ) -> None:
        if job.workflow_id is not None:
            release.settled(store, job.id, state, now)


#: The one instance `JobsAppConfig.ready` registers.
hook = WorkflowHook()
