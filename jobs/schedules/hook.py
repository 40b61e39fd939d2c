"""Schedules on the lifecycle hooks (`jobs.lifecycle`): the one place where a
job's life meets its schedule, so the runner never knows schedules exist.

- Before an occurrence runs, its `Schedule` row is read (`occurrences.admit`):
  a disabled schedule or a missed fire time moves it unrun to the next one.
- Inside the transaction that settles an occurrence for good, the next one
  is queued (`occurrences.follow`).
- A recovering runner's start reconciles the rows with the declarations
  (`reconcile.reconcile`), and every `REPAIR_SECONDS` it looks for schedules
  left without a live occurrence (`reconcile.repair`).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from datetime import datetime

from django.db import DatabaseError, InterfaceError

from jobs import lifecycle, log, sweep
from jobs.config import JobsSettings
from jobs.models import Job
from jobs.registry import Registry
from jobs.schedules import occurrences
from jobs.schedules.plan import KEY_PREFIX
from jobs.schedules.reconcile import reconcile, repair
from jobs.store import Store

#: How often a recovering runner looks for schedules left without an
#: occurrence (a row edited into nonsense when one ended, then fixed): an
#: index probe a schedule.
REPAIR_SECONDS = 60.0


class ScheduleHook(lifecycle.Hook):
    """A schedule's occurrences, told apart by their "schedule:" key."""

    key_prefix = KEY_PREFIX  # the other jobs are not asked `before_run`

    @property
    def upkeep_seconds(self) -> float:  # type: ignore[override]
        return REPAIR_SECONDS  # read each time: tests shorten it

    def before_run(
        self, job: Job, clock: Callable[[], datetime], using: str
    ) -> lifecycle.Verdict | None:
        if not job.key.startswith(KEY_PREFIX):
            return None
        occurrence = occurrences.admit(job, clock(), using)
        if occurrence is None:
            return None  # its schedule is gone: an ordinary job now
        if occurrence.skip is None:
            return lifecycle.Verdict()

        def skip(store: Store, skipped: Job, now: datetime) -> bool:
            return occurrences.skipped(store, skipped, occurrence, now)

        return lifecycle.Verdict(skip, occurrence.reason)

    def after_settle(
        self, store: Store, job: Job, now: datetime, state: str, started: datetime | None
    ) -> None:
        occurrences.follow(store, job, now, state, started)

    def at_start(self, registry: Registry, settings: JobsSettings, using: str) -> None:
        """The reconcile, which leaves out the sweep while `retention_days` is 0."""
        try:
            switched_off = [sweep.KIND] if settings.retention_days == 0 else []
            reconcile(registry, using, without=switched_off)
        except Exception as error:
            log.event(
                "schedules_reconcile_failed",
                logging.ERROR,
                outcome="failure",
                error=repr(error),
                traceback=traceback.format_exc(),
            )

    def config_changed(
        self, previous: JobsSettings, current: JobsSettings, registry: Registry, using: str
    ) -> None:
        """Retention switched back on schedules the sweep again (switching it
        off stops the sweep at its next pass; see `jobs.sweep`)."""
        if previous.retention_days == 0 and current.retention_days > 0:
            reconcile(registry, using, only=sweep.KIND)

    def upkeep(self, using: str) -> None:
        try:
            repair(using)
        except (DatabaseError, InterfaceError) as error:
            log.event("schedules_repair_failed", logging.WARNING, outcome="failure", error=error)


#: The one instance `JobsAppConfig.ready` registers.
hook = ScheduleHook()
