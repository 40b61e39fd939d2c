"""The retention sweep: a schedule, every hour, that deletes settled rows past
`retention_days`.

Maintenance as a schedule rather than a thread: the live identity keeps it
one row however many runners start, so no leader election is needed. It
deletes in small batches so it never holds a long lock. With `retention_days`
at 0 it is not scheduled at all: a runner starting then plans none (and
retires a queued one), an occurrence running then deletes nothing and is the
last; setting it back above 0 plans it again at once (`jobs.runner.maintenance`).
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobs import live_config
from jobs.handlers import Done, JobHandler, Outcome
from jobs.models import Job
from jobs.registry import register
from jobs.schedules.reconcile import forget
from jobs.store import for_database

KIND = "jobs.sweep"
#: The key the sweep had before it was a schedule: a row still queued under
#: it is retired the first time it runs, the schedule taking over.
LEGACY_KEY = "retention"
#: How often the sweep runs; an hour keeps the table near its bound without
#: making deletion a noticeable load.
INTERVAL = timedelta(hours=1)
#: Rows per DELETE: small enough that each statement's locks are brief.
BATCH = 1_000


@register
class SweepHandler(JobHandler):
    kind = KIND

    #: Not planned while retention is 0 (`jobs.runner.maintenance`).
    schedule = INTERVAL

    def run(self, job: Job) -> Outcome:
        if job.key == LEGACY_KEY:
            return Done()
        days = live_config.current().retention_days
        if days == 0:
            forget(KIND, using=job._state.db)  # this occurrence is the last
            return Done()
        store = for_database(job._state.db)
        before = timezone.now() - timedelta(days=days)
        while store.prune(before, BATCH) == BATCH:
            pass
        return Done()
