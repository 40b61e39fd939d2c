"""Handlers for the schedules' process tests (tests/acceptance/test_schedules_process.py).

Imported at the bottom of `tests.jobapp.jobs`, so autodiscovery registers them
in every `runjobs` process the tests start.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from django.utils import timezone

from jobs import Done, JobHandler, register
from jobs.models import Job
from tests.jobapp.models import Execution


@register
class FirstSleepsHandler(JobHandler):
    """Records the execution and succeeds; the first execution ever of its key
    sleeps `payload["seconds"]` first, so a test can kill its runner mid-attempt
    once and watch the schedule's later occurrences run at once. Its budget (so
    its lease) comes from `TEST_SLEEP_LEASE`, as `test.sleep`'s does."""

    kind = "test.first_sleeps"

    def budget(self) -> timedelta:
        return timedelta(seconds=float(os.environ.get("TEST_SLEEP_LEASE", "2")))

    def run(self, job: Job) -> Done:
        first = not Execution.objects.filter(key=job.key).exists()
        execution = Execution.objects.create(
            job_id=job.id,
            key=job.key,
            attempt=job.attempts,
            pid=os.getpid(),
            started_at=timezone.now(),
        )
        if first:
            time.sleep(float(job.payload.get("seconds", 0)))
        execution.finished_at = timezone.now()
        execution.save(update_fields=["finished_at"])
        return Done()
