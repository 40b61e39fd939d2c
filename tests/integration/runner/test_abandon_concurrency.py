"""Abandon beside other sessions, on the databases where sessions lock rows
(PostgreSQL, MariaDB): the retired row is never locked while `abandon` runs,
and two runners paying the same debts at once call each `abandon` once."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from jobs import JobSpec, enqueue, retirement
from jobs.models import Job, State
from jobs.runner import maintenance
from jobs.store import for_database
from tests.factories import make_job
from tests.integration.runner.support import WAIT, Fails, install, the_job

pytestmark = [pytest.mark.concurrent_db, pytest.mark.django_db(transaction=True)]


def lock_at_once(job_id: uuid.UUID) -> tuple[str, ...]:
    """What another session gets when it asks for the row's lock without waiting:
    ("locked", state, whether a debt is still marked), or ("refused", error)."""
    seen: list[tuple[str, ...]] = []

    def lock() -> None:
        try:
            with transaction.atomic():
                row = Job.objects.select_for_update(nowait=True).get(id=job_id)
                seen.append(("locked", row.state, str(row.abandon_owed_at is not None)))
        except DatabaseError as error:
            seen.append(("refused", repr(error)))
        finally:
            connections.close_all()

    other = threading.Thread(target=lock)
    other.start()
    other.join(WAIT)
    return seen[0] if seen else ("no answer",)


def test_while_a_runners_abandon_runs_another_session_can_lock_the_retired_row_at_once(
    registry, make_runner
):
    """No user code runs while a retirement holds the row: a renewal, a cancel or a
    claim beside it never waits for `abandon`."""

    class Locks(Fails):
        kind = "test.locks"

        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str, ...]] = []

        def abandon(self, job: Job, reason: str) -> None:
            super().abandon(job, reason)
            self.seen.append(lock_at_once(job.id))

    handler = install(registry, Locks)
    assert enqueue(JobSpec.now(Locks.kind, "k"))
    make_runner(registry=registry).drain()

    assert the_job(Locks.kind).state == State.FAILED
    assert handler.seen == [("locked", State.FAILED, "False")], (
        "while abandon ran, the row was retired, its debt claimed, and nobody held its lock"
    )


def test_two_runners_paying_the_same_debts_at_once_call_each_abandon_once(registry):
    """Both read every debt before either claims one; the claim lets one through."""
    handler = install(registry, Fails)
    past = timezone.now() - retirement.GRACE - timedelta(seconds=1)
    keys = [f"k{n:02d}" for n in range(20)]
    for key in keys:
        make_job(key, state=State.FAILED, kind=Fails.kind, abandon_owed_at=past)
    both_read = threading.Barrier(2, timeout=WAIT)
    found: list[int] = []
    errors: list[BaseException] = []

    def runner(reverse: bool) -> None:
        try:
            store = for_database()
            owed = maintenance.owed(store, registry, timezone.now())
            found.append(len(owed))
            both_read.wait()
            maintenance.pay_debts(store, registry, owed[::-1] if reverse else owed)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=runner, args=(reverse,)) for reverse in (False, True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)

    assert not errors, errors
    assert found == [20, 20], "each runner found every debt"
    calls = Counter(key for key, _ in handler.abandoned)
    assert calls == Counter(keys), f"each abandon was called once, not {calls}"
    assert not Job.objects.filter(abandon_owed_at__isnull=False).exists(), "every debt is paid"
