"""Handlers for tests that run real `runjobs` processes (found by autodiscovery).

Each records its executions, so a test can check the books afterwards: which
attempts ran, in which process, and whether they finished.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from django.utils import timezone

from jobs import Done, JobHandler, Retry, register
from jobs.models import Job
from tests.jobapp.models import Abandonment, Execution


def _record(job: Job) -> Execution:
    return Execution.objects.create(
        job_id=job.id, key=job.key, attempt=job.attempts, pid=os.getpid(), started_at=timezone.now()
    )


def _finish(execution: Execution) -> None:
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@register
class RecordHandler(JobHandler):
    """Records the execution and succeeds."""

    kind = "test.record"

    def run(self, job: Job) -> Done:
        _finish(_record(job))
        return Done()

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())


@register
class SleepHandler(JobHandler):
    """Sleeps `payload["seconds"]` on the attempts listed in `payload["sleep_on"]`
    (every attempt when absent), then succeeds; `payload["retry"]` makes it Retry instead."""

    kind = "test.sleep"

    def lease(self) -> timedelta:
        return timedelta(seconds=float(os.environ.get("TEST_SLEEP_LEASE", "2")))

    def run(self, job: Job) -> Done | Retry:
        execution = _record(job)
        sleep_on = job.payload.get("sleep_on")
        if sleep_on is None or job.attempts in sleep_on:
            time.sleep(float(job.payload.get("seconds", 0)))
        _finish(execution)
        if job.payload.get("retry"):
            return Retry("asked to retry")
        return Done()

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())
