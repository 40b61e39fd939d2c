"""Workflows on the lifecycle hooks (`jobs.lifecycle`): the one place where a
job's life meets its workflow, so the runner never knows workflows exist.

A step is told apart by its `workflow_id`, a column the claim reads back and
the hook `marks`: a plain job (NULL) costs each attempt one attribute read
and no statement. A pass's step `Done`s are settled together, with
`after_settle_many` in that settle's transaction; there, and in every
retirement's, the steps waiting for them are moved on (`release.settled_many`).
A recovering runner's start, and every `REPAIR_SECONDS` after, repairs a
waiting step whose dependencies all settled without moving it on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.db import DatabaseError, InterfaceError
from django.utils import timezone

from jobs import lifecycle, log
from jobs.config import JobsSettings
from jobs.models import Job
from jobs.registry import Registry
from jobs.store import Store, for_database
from jobs.workflows import release

#: How often a recovering runner looks for waiting steps none of whose
#: dependencies is live (`release.repair`): rows edited by hand, a restore.
REPAIR_SECONDS = 60.0


class WorkflowHook(lifecycle.Hook):
    """A workflow's steps, told apart by their `workflow_id`."""

    marks = "workflow_id"

    def after_settle(
        self, store: Store, job: Job, now: datetime, state: str, started: datetime | None
    ) -> None:
        if job.workflow_id is not None:
            release.settled(store, job.id, state, now)

    def after_settle_many(
        self, store: Store, jobs: Sequence[Job], now: datetime, state: str
    ) -> None:
        steps = [(job.id, state) for job in jobs if job.workflow_id is not None]
        if steps:
            release.settled_many(store, steps, now)

    @property
    def upkeep_seconds(self) -> float:  # type: ignore[override]
        return REPAIR_SECONDS  # read each time: tests shorten it

    def at_start(self, registry: Registry, settings: JobsSettings, using: str) -> None:
        self.upkeep(using)

    def upkeep(self, using: str) -> None:
        try:
            release.repair(for_database(using), timezone.now())
        except (DatabaseError, InterfaceError) as error:
            log.event("workflow_repair_failed", logging.WARNING, outcome="failure", error=error)


#: The one instance `JobsAppConfig.ready` registers.
hook = WorkflowHook()
