"""`enqueue_many`: every rule of `enqueue`, for a batch, in one statement or transaction."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from jobs import InvalidJobSpec, JobSpec, enqueue, enqueue_many
from jobs.models import Job
from jobs.queue import wakeup

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_many_says_for_each_spec_whether_it_was_queued():
    assert enqueue(JobSpec.now("test.record", "held"))
    specs = [
        JobSpec.now("test.record", "a"),
        JobSpec.now("test.record", "held"),
        JobSpec.now("test.record", "b"),
        JobSpec.now("test.record", "a"),
    ]
    assert enqueue_many(specs) == [True, False, True, False], (
        "a live identity refuses, whether held before or earlier in the batch"
    )
    assert sorted(Job.objects.values_list("key", flat=True)) == ["a", "b", "held"]


def test_one_bad_spec_refuses_the_whole_batch_and_writes_nothing():
    specs = [JobSpec.now("test.record", "fine"), JobSpec.now("test.record", "")]
    with pytest.raises(InvalidJobSpec):
        enqueue_many(specs)
    assert not Job.objects.exists(), "nothing from a refused batch is written"


def test_a_batch_carries_each_specs_fields_and_the_configured_budget(configure):
    configure(max_attempts=7)
    enqueue_many(
        [
            JobSpec.now("test.record", "own").with_max_attempts(2).with_payload({"n": 1}),
            JobSpec.now("test.record", "configured"),
        ]
    )
    own, configured = Job.objects.get(key="own"), Job.objects.get(key="configured")
    assert (own.max_attempts, own.payload) == (2, {"n": 1})
    assert configured.max_attempts == 7, "the config row's budget is frozen onto the row"


def test_a_batch_is_one_statement_on_postgresql_and_mysql_and_one_transaction_on_sqlite():
    specs = [JobSpec.now("test.record", f"k{n}") for n in range(50)]
    with CaptureQueriesContext(connection) as queries:
        enqueue_many(specs)
    inserts = [q for q in queries.captured_queries if "INSERT" in q["sql"]]
    expected = 50 if connection.vendor == "sqlite" else 1
    assert len(inserts) == expected
    assert Job.objects.count() == 50


def enqueue_many_then_fail() -> None:
    with transaction.atomic():
        enqueue_many([JobSpec.now("test.record", "x")])
        raise RuntimeError("the caller fails after enqueueing")


def test_a_batch_inside_a_rolled_back_transaction_vanishes_and_wakes_nobody():
    doorbell = wakeup.subscribe()
    try:
        with pytest.raises(RuntimeError):
            enqueue_many_then_fail()
        assert not doorbell.is_set(), "a rolled-back batch rings nothing"
        assert not Job.objects.exists()
        enqueue_many([JobSpec.now("test.record", "y")])
        assert doorbell.is_set(), "a committed batch wakes the runners here"
    finally:
        wakeup.unsubscribe(doorbell)


def test_an_empty_batch_is_an_empty_answer():
    assert enqueue_many([]) == []
