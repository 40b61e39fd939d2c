"""The retention sweep: a periodic job that deletes settled rows past `retention_days`.

Maintenance as a job rather than a thread: the live-identity constraint keeps
it one row however many runners start, so no leader election is needed. It
deletes in small batches so it never holds a long lock.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobs import live_config
from jobs.handlers import Done, JobHandler, Outcome, Reschedule
from jobs.models import Job
from jobs.queue import enqueue_or_log
from jobs.registry import register
from jobs.spec import JobSpec
from jobs.store import for_database

KIND = "jobs.sweep"
KEY = "retention"
#: How often the sweep runs; an hour keeps the table near its bound without
#: making deletion a noticeable load.
INTERVAL = timedelta(hours=1)
#: Rows per DELETE: small enough that each statement's locks are brief.
BATCH = 1_000


@register
class SweepHandler(JobHandler):
    kind = KIND

    def run(self, job: Job) -> Outcome:
        days = live_config.current().retention_days
        if days == 0:
            return Done()  # retention switched off: stop repeating
        store = for_database(job._state.db)
        before = timezone.now() - timedelta(days=days)
        while store.prune(before, BATCH) == BATCH:
            pass
        return Reschedule(INTERVAL)

    def recover(self) -> None:
        schedule()


def schedule() -> bool:
    """Queue the sweep unless retention is off or it is already queued; True if queued."""
    if live_config.current().retention_days == 0:
        return False
    return enqueue_or_log(JobSpec.now(KIND, KEY))
