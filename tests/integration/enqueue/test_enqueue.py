"""`enqueue` and `enqueue_or_log` against a real database: the live identity, what a
row carries, the caller's transaction, refusals that write nothing, and the
in-process wake-up."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from datetime import timezone as tz
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction
from freezegun import freeze_time

from jobs import Done, InvalidJobSpec, JobHandler, JobSpec, enqueue, enqueue_or_log
from jobs.config import JobsSettings
from jobs.models import Job, State
from jobs.queue import wakeup
from jobs.runner import Runner
from jobs.spec import PAYLOAD_MAX_BYTES
from jobs.store import for_database
from jobs.store.base import Store
from tests.jobapp.models import Execution

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Rollback(Exception):
    """Raised inside atomic() to roll the block back."""


def enqueue_then_roll_back(spec: JobSpec) -> None:
    """Enqueue `spec` inside atomic(), then roll the block back."""
    with transaction.atomic():
        assert enqueue(spec), "the job was queued inside the block"
        raise Rollback


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


@pytest.fixture
def doorbell() -> Iterator[threading.Event]:
    """A runner's view of the wake-up: an event that `enqueue` rings on commit."""
    event = wakeup.subscribe()
    yield event
    wakeup.unsubscribe(event)


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


# -- refusals write nothing ---------------------------------------------------------


def spec(**fields: Any) -> JobSpec:
    """A valid spec with `fields` replaced; the constructor itself checks nothing."""
    return dataclasses.replace(JobSpec("orders.ship", "k", run_at=T0), **fields)


BAD_SPECS = [
    pytest.param(spec(kind=""), id="empty-kind"),
    pytest.param(spec(key=""), id="empty-key"),
    pytest.param(spec(kind=5), id="kind-not-a-string"),
    pytest.param(spec(key=5), id="key-not-a-string"),
    pytest.param(spec(kind="k" * 101), id="kind-too-long"),
    pytest.param(spec(key="k" * 256), id="key-too-long"),
    pytest.param(spec(payload={"s": {1}}), id="payload-with-a-set"),
    pytest.param(spec(payload={"at": T0}), id="payload-with-a-datetime"),
    pytest.param(spec(payload=[1]), id="payload-a-list"),
    pytest.param(spec(payload={"x": float("nan")}), id="payload-with-nan"),
    pytest.param(spec(payload={"p": "x" * (1024 * 1024)}), id="payload-too-large"),
    pytest.param(spec(run_at=datetime(2026, 3, 1)), id="naive-run-at"),
    pytest.param(spec(deadline=datetime(2026, 3, 2)), id="naive-deadline"),
    pytest.param(spec(deadline=T0 - timedelta(seconds=1)), id="deadline-before-run-at"),
    pytest.param(spec(max_attempts=0), id="max-attempts-zero"),
    pytest.param(spec(max_attempts=-1), id="max-attempts-negative"),
    pytest.param(spec(max_attempts=True), id="max-attempts-bool"),
    pytest.param(spec(max_attempts=2.5), id="max-attempts-float"),
    # What one database stores and another refuses is refused before any SQL runs.
    pytest.param(spec(key="k\x00"), id="nul-in-key"),
    pytest.param(spec(kind="orders\x00ship"), id="nul-in-kind"),
    pytest.param(spec(payload={"s": "\x00"}), id="nul-in-payload"),
    # JSON keys are strings: {1: "a"} would be queued as {"1": "a"}.
    pytest.param(spec(payload={1: "a"}), id="payload-with-an-int-key"),
    # PostgreSQL refuses a lone surrogate and a budget past its 32-bit column;
    # a database error there would break the caller's transaction.
    pytest.param(spec(key="k\ud800"), id="lone-surrogate-in-key"),
    pytest.param(spec(payload={"s": "\udfff"}), id="lone-surrogate-in-payload"),
    pytest.param(spec(max_attempts=2**31), id="max-attempts-past-the-column"),
    # Year 1 at +05:00 is before year 1 in UTC: no datetime can hold it.
    pytest.param(
        spec(run_at=datetime(1, 1, 1, 1, 0, tzinfo=tz(timedelta(hours=5)))),
        id="run-at-before-year-1-in-utc",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("bad", BAD_SPECS)
def test_every_kind_of_bad_input_raises_invalid_job_spec_and_writes_no_row(bad):
    assert enqueue(JobSpec.now("orders.ship", "existing")), "a good row is there beforehand"
    with pytest.raises(InvalidJobSpec):
        enqueue(bad)
    assert Job.objects.count() == 1, "a refused spec leaves no row behind"


@pytest.mark.django_db
def test_a_payload_of_exactly_the_limit_is_queued_whole_and_one_byte_more_writes_nothing():
    overhead = len(json.dumps({"p": ""}))
    at_limit = {"p": "x" * (PAYLOAD_MAX_BYTES - overhead)}
    assert len(json.dumps(at_limit).encode()) == PAYLOAD_MAX_BYTES, "the payload is at the limit"
    assert enqueue(JobSpec.now("orders.ship", "at-limit").with_payload(at_limit)), (
        "a payload of exactly PAYLOAD_MAX_BYTES is queued"
    )
    assert Job.objects.get(key="at-limit").payload == at_limit, "and stored whole"
    over = {"p": at_limit["p"] + "x"}
    with pytest.raises(InvalidJobSpec, match=f"the limit is {PAYLOAD_MAX_BYTES}"):
        enqueue(JobSpec.now("orders.ship", "over").with_payload(over))
    assert not Job.objects.filter(key="over").exists(), "one byte more is refused, writing nothing"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(datetime.min.replace(tzinfo=UTC), id="year-1"),
        pytest.param(datetime.max.replace(tzinfo=UTC), id="end-of-year-9999"),
    ],
)
def test_the_earliest_and_latest_instants_a_datetime_holds_round_trip(moment):
    assert enqueue(JobSpec("orders.ship", "k", run_at=moment, deadline=moment)), "it is queued"
    job = Job.objects.get(key="k")
    assert (job.run_at, job.deadline) == (moment, moment), "run_at and deadline come back exact"


# -- the in-process wake-up ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_enqueue_rings_the_doorbell_when_the_callers_transaction_commits(doorbell):
    with transaction.atomic():
        assert enqueue(JobSpec.now("orders.ship", "ord-1"))
        assert not doorbell.is_set(), "no runner is woken for a row it cannot see yet"
    assert doorbell.is_set(), "the commit wakes the runners in this process"


@pytest.mark.django_db(transaction=True)
def test_enqueue_outside_a_transaction_rings_the_doorbell_at_once(doorbell):
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    assert doorbell.is_set(), "in autocommit the row is committed, so the runners are woken"


@pytest.mark.django_db(transaction=True)
def test_enqueue_or_log_rings_the_doorbell_on_commit_too(doorbell):
    assert enqueue_or_log(JobSpec.now("orders.ship", "ord-1"))
    assert doorbell.is_set(), "enqueue_or_log wakes the runners like enqueue"


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_enqueue_never_rings_the_doorbell(doorbell):
    with pytest.raises(Rollback):
        enqueue_then_roll_back(JobSpec.now("orders.ship", "ord-1"))
    assert not doorbell.is_set(), "a job that was rolled back wakes nobody"


@pytest.mark.django_db(transaction=True)
def test_a_refused_duplicate_never_rings_the_doorbell(doorbell):
    assert enqueue(JobSpec.now("orders.ship", "ord-1"))
    doorbell.clear()
    assert not enqueue(JobSpec.now("orders.ship", "ord-1")), "the duplicate is refused"
    assert not doorbell.is_set(), "nothing new was queued, so nobody is woken"


@pytest.mark.django_db(transaction=True)
def test_every_subscribed_runner_is_woken():
    """One event per runner: a runner clearing its own doorbell never swallows another's."""
    first, second = wakeup.subscribe(), wakeup.subscribe()
    try:
        assert enqueue(JobSpec.now("orders.ship", "ord-1"))
        assert first.is_set(), "the first runner is woken"
        assert second.is_set(), "and the second"
    finally:
        wakeup.unsubscribe(first)
        wakeup.unsubscribe(second)


@pytest.mark.django_db(transaction=True)
def test_a_runner_in_this_process_starts_a_fresh_job_long_before_its_poll_interval(
    registry, make_runner, monkeypatch
):
    """The doorbell is what makes an in-process runner start work at once, not a minute later."""
    started = threading.Event()

    @registry.register
    class Recording(JobHandler):
        kind = "test.wakeup"

        def run(self, job):
            started.set()
            return Done()

    runner: Runner = make_runner(
        registry=registry, settings=lambda: JobsSettings(poll_interval_ms=60_000)
    )
    first_pass_done = threading.Event()
    run_pass = runner.run_pass

    def observed_pass() -> tuple[int, int]:
        result = run_pass()
        first_pass_done.set()
        return result

    monkeypatch.setattr(runner, "run_pass", observed_pass)

    def serve() -> None:
        try:
            runner.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=serve, name="test-runner", daemon=True)
    thread.start()
    try:
        assert first_pass_done.wait(10), "the runner made its first (empty) pass"
        assert enqueue(JobSpec.now("test.wakeup", "k"))
        assert started.wait(5), "the job started within seconds, not after the 60 s poll"
    finally:
        runner.stop()
        thread.join(10)
    assert not thread.is_alive(), "the runner's loop stopped when asked"
    assert runner.finish(10), "the attempt finished"
    assert Job.objects.get(kind="test.wakeup").state == State.DONE, "and the job settled done"
