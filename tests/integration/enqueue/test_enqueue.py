"""`enqueue` and `enqueue_or_log` against a real database: the live identity, what a
row carries, and the caller's transaction. Refusals that write nothing are
test_enqueue_refusals.py; the in-process wake-up, test_wakeup.py."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from datetime import timezone as tz
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction
from freezegun import freeze_time

from jobs import InvalidJobSpec, JobSpec, enqueue, enqueue_or_log
from jobs.models import Job, State
from jobs.store import for_database
from jobs.store.base import Store
from tests.integration.enqueue.support import T0, Rollback, enqueue_then_roll_back
from tests.jobapp.models import Execution


def in_another_thread[R](query: Callable[[], R]) -> R:
    """Run `query` on another thread, so on its own database connection."""
    results: list[R] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(query())
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the other connection's query finished"
    if errors:
        raise errors[0]
    return results[0]


def callers_own_write(key: str) -> None:
    """A write of the caller's own, standing for the view's business rows."""
    Execution.objects.create(job_id=uuid.uuid4(), key=key, attempt=0, pid=0, started_at=T0)


def rows_for(kind: str, key: str) -> int:
    return Job.objects.filter(kind=kind, key=key).count()


# -- the live identity --------------------------------------------------------------


@pytest.mark.django_db
def test_enqueue_takes_a_free_identity_and_refuses_a_held_one():
    assert enqueue(JobSpec.now("orders.ship", "ord-1")), "a free (kind, key) is taken"
    assert not enqueue(JobSpec.now("orders.ship", "ord-1")), (
        "a second live job for one identity is refused, not duplicated"
    )
    assert Job.objects.filter(kind="orders.ship", key="ord-1").count() == 1, "one row, not two"


@pytest.mark.django_db
def test_a_refused_duplicate_leaves_the_live_row_untouched():
    """The identity's holder keeps its own payload and schedule; the newcomer is dropped."""
    assert enqueue(JobSpec.now("orders.ship", "ord-1").with_payload({"v": 1}))
    before = Job.objects.get(kind="orders.ship", key="ord-1")
    later = JobSpec.now("orders.ship", "ord-1").with_payload({"v": 2}).with_max_attempts(9)
    assert not enqueue(later.with_delay(timedelta(hours=1))), "the duplicate is refused"
    after = Job.objects.get(kind="orders.ship", key="ord-1")
    assert (after.id, after.payload, after.run_at, after.max_attempts) == (
        before.id,
        before.payload,
        before.run_at,
        before.max_attempts,
    ), "the live row is exactly as it was"


@pytest.mark.django_db
def test_a_different_key_or_kind_is_a_different_identity():
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    assert enqueue(JobSpec.now("orders.ship", "ord-2")), "another key of the kind is accepted"
    assert enqueue(JobSpec.now("orders.refund", "ord-1")), "the key under another kind too"
    assert Job.objects.count() == 3, "three identities, three rows"


@pytest.mark.django_db
def test_keys_that_differ_only_in_case_accents_or_trailing_spaces_are_different_identities():
    """A key is compared byte for byte on every database (MySQL's default collation
    would fold these together and refuse real work as a duplicate)."""
    keys = ["ord-1", "ORD-1", "ord-1 ", "órd-1"]
    assert all(enqueue(JobSpec.now("orders.ship", key)) for key in keys)
    assert enqueue(JobSpec.now("Orders.Ship", "ord-1")), "the kind is compared exactly too"
    assert sorted(Job.objects.values_list("key", flat=True)) == sorted([*keys, "ord-1"])
    assert Job.objects.filter(kind="orders.ship", key="ORD-1").count() == 1


@pytest.mark.django_db
def test_a_running_job_still_holds_its_identity():
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    Job.objects.filter(kind="orders.ship").update(state=State.RUNNING)
    assert not enqueue(JobSpec.now("orders.ship", "ord-1")), "running is live: still refused"


@pytest.mark.django_db
@pytest.mark.parametrize("settled", [State.DONE, State.FAILED, State.CANCELLED])
def test_a_settled_job_releases_its_identity(settled):
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    Job.objects.filter(kind="orders.ship", key="ord-1").update(state=settled, finished_at=T0)
    assert enqueue(JobSpec.now("orders.ship", "ord-1")), (
        f"a {settled} job has released its identity: the same key queues again"
    )
    states = sorted(Job.objects.filter(key="ord-1").values_list("state", flat=True))
    assert states == sorted([settled.value, State.QUEUED.value]), "the history row is kept"
    assert not enqueue(JobSpec.now("orders.ship", "ord-1")), "and the new row holds it again"


# -- what a row carries -------------------------------------------------------------


@pytest.mark.django_db
def test_the_row_carries_the_specs_payload_schedule_deadline_and_budget():
    run_at = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    deadline = run_at + timedelta(hours=6)
    payload = {"order_id": "ord-1", "n": 3, "f": 0.5, "ok": True, "nested": {"l": [1, None]}}
    spec = JobSpec(
        "orders.ship", "ord-1", payload=payload, run_at=run_at, deadline=deadline, max_attempts=9
    )
    with freeze_time(T0):
        assert enqueue(spec)
    job = Job.objects.get(kind="orders.ship", key="ord-1")
    assert job.payload == payload, "the payload round-trips"
    assert job.run_at == run_at, "run_at is kept to the microsecond"
    assert job.deadline == deadline, "the deadline is kept"
    assert job.max_attempts == 9, "the spec's own budget is frozen onto the row"
    assert (job.state, job.attempts) == (State.QUEUED, 0), "a new row is queued, unattempted"
    assert (job.lease_expires_at, job.finished_at, job.last_error) == (None, None, ""), (
        "a new row has no lease, no finish and no error"
    )
    assert job.created_at == job.updated_at == T0, "created_at and updated_at are the enqueue time"


@pytest.mark.django_db
def test_an_aware_run_at_in_any_time_zone_is_stored_as_the_same_instant():
    run_at = datetime(2026, 3, 1, 14, 0, tzinfo=tz(timedelta(hours=2)))
    assert enqueue(JobSpec("orders.ship", "ord-1", run_at=run_at))
    assert Job.objects.get().run_at == T0, "14:00+02:00 is 12:00 UTC"


@pytest.mark.django_db
def test_a_spec_without_a_deadline_stores_none():
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    assert Job.objects.get().deadline is None, "no deadline means retry until the budget runs out"


@pytest.mark.django_db
def test_a_delayed_spec_is_queued_to_run_later():
    with freeze_time(T0):
        assert enqueue(JobSpec.now("orders.ship", "ord-1").with_delay(timedelta(minutes=10)))
    assert Job.objects.get().run_at == T0 + timedelta(minutes=10), "run_at is the delay from now"


@pytest.mark.django_db
def test_a_spec_without_a_budget_takes_the_configured_max_attempts(configure):
    configure(max_attempts=7)
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    assert Job.objects.get().max_attempts == 7, "the configured budget is frozen onto the row"


@pytest.mark.django_db
def test_a_spec_with_its_own_budget_overrides_the_configured_one(configure):
    configure(max_attempts=7)
    assert enqueue(JobSpec.now("orders.ship", "ord-1").with_max_attempts(2))
    assert Job.objects.get().max_attempts == 2, "the spec's budget wins over the config"


@pytest.mark.django_db
def test_a_changed_max_attempts_reaches_new_work_but_never_the_backlog(configure):
    """Raising max_attempts does not rescue a backlog: rows keep what they were queued under."""
    configure(max_attempts=3)
    assert enqueue(JobSpec.now("orders.ship", "before"))
    configure(max_attempts=11)
    assert enqueue(JobSpec.now("orders.ship", "after"))
    budgets = dict(Job.objects.values_list("key", "max_attempts"))
    assert budgets["before"] == 3, "a row already queued keeps the budget it was queued under"
    assert budgets["after"] == 11, "work queued after the change takes the new budget"


# -- the caller's transaction -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_refused_duplicate_does_not_break_the_callers_transaction():
    """A view that enqueues inside atomic() must not have its own writes lost to a duplicate."""
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    with transaction.atomic():
        assert not enqueue(JobSpec.now("orders.ship", "ord-1")), "the duplicate is refused"
        assert Job.objects.count() == 1, "the block can still query after the refusal"
        callers_own_write("ord-1")
        assert not connection.needs_rollback, "the transaction is not marked for rollback"
    assert in_another_thread(lambda: Execution.objects.filter(key="ord-1").count()) == 1, (
        "the caller's block committed its own write"
    )


@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_inside_atomic_is_invisible_elsewhere_until_commit():
    with transaction.atomic():
        assert enqueue(JobSpec.now("orders.ship", "ord-1"))
        assert rows_for("orders.ship", "ord-1") == 1, "the caller sees its own row"
        assert in_another_thread(lambda: rows_for("orders.ship", "ord-1")) == 0, (
            "another connection cannot see the job before the caller commits"
        )
    assert in_another_thread(lambda: rows_for("orders.ship", "ord-1")) == 1, (
        "after the commit every connection sees it"
    )


@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_inside_a_rolled_back_block_is_gone():
    """The job is part of the caller's unit of work: no order, no shipping job."""
    with pytest.raises(Rollback):
        enqueue_then_roll_back(JobSpec.now("orders.ship", "ord-1"))
    assert Job.objects.count() == 0, "the rollback took the job with it"
    assert enqueue(JobSpec.now("orders.ship", "ord-1")), "and never held the identity"


@pytest.mark.django_db(transaction=True)
def test_a_spec_the_database_cannot_store_does_not_break_the_callers_transaction():
    """Bad input must be refused before SQL runs: on PostgreSQL a failed statement aborts
    the caller's whole transaction."""
    refusal: Exception | None = None
    with transaction.atomic():
        try:
            enqueue(JobSpec.now("orders.ship", "ord-1").with_payload({"note": "a\x00b"}))
        except Exception as error:  # a caller that catches the refusal carries on
            refusal = error
        assert Job.objects.count() == 0, "nothing was written, and the block can still query"
        callers_own_write("ord-1")
    assert isinstance(refusal, InvalidJobSpec), f"the spec is refused up front, not {refusal!r}"
    assert Execution.objects.filter(key="ord-1").count() == 1, "the caller's block committed"


# -- enqueue_or_log -----------------------------------------------------------------


@pytest.mark.django_db
def test_enqueue_or_log_answers_like_enqueue_when_the_database_is_healthy(caplog):
    with caplog.at_level(logging.INFO, logger="jobs"):
        assert enqueue_or_log(JobSpec.now("orders.ship", "ord-1")), "a free identity is taken"
        assert not enqueue_or_log(JobSpec.now("orders.ship", "ord-1")), "a held one is refused"
    assert Job.objects.count() == 1, "one row"
    assert not [r for r in caplog.records if getattr(r, "event", None) == "job_enqueue_failed"], (
        "a refused duplicate is an answer, not a failure to log"
    )


@pytest.mark.django_db
def test_enqueue_or_log_logs_a_database_failure_and_answers_false(monkeypatch, caplog):
    """For callers with nowhere to put an error, such as a handler's recover()."""

    def broken_insert(self: Store, row: Any) -> bool:
        raise OperationalError("the database went away")

    monkeypatch.setattr(type(for_database()), "insert", broken_insert)
    with caplog.at_level(logging.INFO, logger="jobs"):
        assert not enqueue_or_log(JobSpec.now("orders.ship", "ord-1")), "a failure answers False"
    failures = [r for r in caplog.records if getattr(r, "event", None) == "job_enqueue_failed"]
    assert len(failures) == 1, "one job_enqueue_failed record is logged"
    record = failures[0]
    assert record.levelno == logging.ERROR, "a lost enqueue is an error"
    fields = record.fields  # set through `extra`
    assert (fields["kind"], fields["key"]) == ("orders.ship", "ord-1"), "it names the job"
    assert "the database went away" in str(fields["error"]), "it carries the database's error"
    assert fields["outcome"] == "failure", "its outcome is failure"


@pytest.mark.django_db(transaction=True)
def test_enqueue_or_log_leaves_the_callers_transaction_usable_after_a_failed_statement(
    monkeypatch, caplog
):
    """A real failed statement (which aborts a PostgreSQL transaction) stays inside
    enqueue_or_log's savepoint; the caller's own writes still commit."""

    def failing_insert(self: Store, row: Any) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM jobs_job")
        return True

    monkeypatch.setattr(type(for_database()), "insert", failing_insert)
    with caplog.at_level(logging.ERROR, logger="jobs"), transaction.atomic():
        assert not enqueue_or_log(JobSpec.now("orders.ship", "ord-1")), "the failure answers False"
        assert Job.objects.count() == 0, "the caller's transaction still runs queries"
        callers_own_write("ord-1")
    assert in_another_thread(lambda: Execution.objects.filter(key="ord-1").count()) == 1, (
        "the caller's block committed its own write"
    )
    assert [r for r in caplog.records if getattr(r, "event", None) == "job_enqueue_failed"], (
        "the failure was logged"
    )


@pytest.mark.django_db
def test_enqueue_or_log_still_raises_for_a_spec_that_can_never_be_queued(caplog):
    """A bad spec is the caller's bug, not an outage to log and carry on from."""
    with pytest.raises(InvalidJobSpec):
        enqueue_or_log(JobSpec.now("orders.ship", ""))
    assert Job.objects.count() == 0, "nothing was written"
