"""The `Done` attempts a runner settles together, and the handlers told of them.

A batch is what one settle takes from the completer (`Completer.done_batch`):
the attempts and the rows written for them, in one statement and one commit.
Handlers that listen (`JobHandler.completed`) are told after that commit, one
by one, for the rows the batch won.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobs import log
from jobs.models import Job, State
from jobs.presentation import telling_line
from jobs.retirement import job_fields
from jobs.runner.attempt import Attempt


@dataclass(slots=True)
class DoneBatch:
    """The `Done` attempts one settle takes, and the rows it writes for them."""

    attempts: list[Attempt] = field(default_factory=list)
    #: Each attempt's job and result, as `Store.settle_and_claim` and
    #: `Store.complete_many` take them.
    rows: list[tuple[Job, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.attempts)


def tell_completed(
    batch: DoneBatch, listening: list[int], won: set[uuid.UUID], now: datetime
) -> None:
    """Call `completed` on the handler of each attempt at `listening` (indexes
    into `batch`) whose row the settle at `now` won; a hook that raises is
    logged and the others are still told."""
    for index in listening:
        attempt = batch.attempts[index]
        job = attempt.job
        if job.id not in won:
            continue
        job.state, job.result, job.finished_at = State.DONE, batch.rows[index][1], now
        job.lease_expires_at = None
        try:
            attempt.handler.completed(job)
        except Exception as error:
            log.event(
                "job_completed_hook_failed",
                logging.ERROR,
                outcome="failure",
                **job_fields(job),
                error=telling_line(repr(error), trim=False),
                traceback=traceback.format_exc(),
            )
