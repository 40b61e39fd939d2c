"""An operator's cancel locks the row for its own write only: `abandon`, however
slow, runs after the cancel has committed, so the runner's lease renewals and
anyone else's lock on the row never wait for it (on the databases where
sessions lock rows: PostgreSQL, MariaDB)."""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, connections, transaction

from jobs import JobHandler
from jobs.models import Job, State
from jobs.operations import cancel
from tests.factories import make_job

pytestmark = [pytest.mark.concurrent_db, pytest.mark.django_db(transaction=True)]

KIND = "ops.slow_abandon"
WAIT = 10


class SlowAbandon(JobHandler):
    """Its `abandon` asks, from another session, for the row's lock without
    waiting, and keeps what it got: standing in for a slow one, during which
    the runner's renewal would otherwise wait."""

    kind = KIND

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def abandon(self, job: Job, reason: str) -> None:
        seen: list[tuple[str, str]] = []

        def lock() -> None:
            try:
                with transaction.atomic():
                    row = Job.objects.select_for_update(nowait=True).get(id=job.id)
                    seen.append(("locked", row.state))
            except DatabaseError as error:
                seen.append(("refused", repr(error)))
            finally:
                connections.close_all()

        other = threading.Thread(target=lock)
        other.start()
        other.join(WAIT)
        self.seen.extend(seen or [("no answer", "")])


def test_a_cancels_abandon_runs_with_the_row_unlocked_queued_or_running(registry):
    registry.register(SlowAbandon)
    handler = registry.get(KIND)
    assert isinstance(handler, SlowAbandon)
    queued = make_job("q", kind=KIND)
    running = make_job("r", state=State.RUNNING, kind=KIND)

    report = cancel([queued.id, running.id], by="alice", registry=registry)

    assert report.touched == 2
    assert handler.seen == [("locked", State.CANCELLED)] * 2, (
        "while each abandon ran, another session locked the cancelled row at once"
    )
