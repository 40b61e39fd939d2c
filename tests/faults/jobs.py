"""The fault suite's ledger handler, for runners started with `tests.faults.settings`.

It records each attempt in the ledger (`tests.faults.ledger`), outside the
database, and writes nothing to the database itself: a scenario that crashes
PostgreSQL checks the job rows against a record the crash cannot touch, and no
commit of the handler's flushes the WAL that the runner's own commits leave
unflushed.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from jobs import Done, JobHandler, register
from jobs.models import Job
from tests.faults import ledger


@register
class LedgerHandler(JobHandler):
    """Records the attempt's start, sleeps `payload["seconds"]` (none when absent),
    records its end and succeeds."""

    kind = "faults.ledger"

    def budget(self) -> timedelta:
        # Short, so a row whose Done a crash forgot comes back within seconds.
        return timedelta(seconds=float(os.environ.get("FAULTS_LEDGER_LEASE", "2")))

    def run(self, job: Job) -> Done:
        run = ledger.started(job)
        seconds = float(job.payload.get("seconds", 0))
        if seconds:
            time.sleep(seconds)
        ledger.ended(run)
        return Done()
