"""`enqueue_many`: every rule of `enqueue`, for a batch, in one transaction (on
PostgreSQL and MySQL a statement per chunk of rows, not per row)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from jobs import InvalidJobSpec, JobSpec, enqueue, enqueue_many, wakeup
from jobs.models import Job
from jobs.store import postgresql

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


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """PostgreSQL's statement per chunk, at 3 rows a chunk, so a short batch spans several."""
    monkeypatch.setattr(postgresql, "INSERT_MANY_CHUNK", 3)
    return 3


def test_a_batch_spanning_several_statements_answers_for_each_spec_in_order(small_chunks):
    assert enqueue(JobSpec.now("test.record", "held"))
    keys = ["a", "b", "held", "c", "a", "d", "b", "e"]  # repeats cross the 3-row chunks
    answers = enqueue_many([JobSpec.now("test.record", key) for key in keys])
    assert answers == [True, True, False, True, False, True, False, True], (
        "an identity taken by an earlier chunk is refused as within one statement"
    )
    assert sorted(Job.objects.values_list("key", flat=True)) == ["a", "b", "c", "d", "e", "held"]


@pytest.mark.postgresql
def test_a_batch_on_postgresql_is_a_statement_per_chunk_with_ids_from_the_database(
    small_chunks,
):
    specs = [JobSpec.now("test.record", f"k{n}") for n in range(8)]
    with CaptureQueriesContext(connection) as queries:
        assert all(enqueue_many(specs))
    sql = [q["sql"] for q in queries.captured_queries]
    assert sum("INSERT" in text for text in sql) == 3, "8 rows at 3 a chunk"
    assert Job.objects.count() == 8
    ids = list(Job.objects.values_list("id", flat=True))
    assert len(set(ids)) == 8, "the database gives each row its own id"
    assert {job_id.version for job_id in ids} == {4}, "a random UUID, as uuid.uuid4 makes"


@pytest.mark.postgresql
def test_a_statement_refused_in_a_later_chunk_writes_nothing_from_the_earlier_ones(
    small_chunks,
):
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN IF NEW.key = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF;"
            " RETURN NEW; END $$;"
            "CREATE TRIGGER test_refuse_poison BEFORE INSERT ON jobs_job"
            " FOR EACH ROW EXECUTE FUNCTION test_refuse_poison()"
        )
    try:
        keys = [f"k{n}" for n in range(7)] + ["poison"]  # the third chunk fails
        with pytest.raises(DatabaseError, match="poison refused"):
            enqueue_many([JobSpec.now("test.record", key) for key in keys])
        assert not Job.objects.exists(), "the chunks before it are rolled back with it"
        with transaction.atomic():
            with pytest.raises(DatabaseError):
                enqueue_many([JobSpec.now("test.record", key) for key in keys])
            assert enqueue(JobSpec.now("test.record", "after")), (
                "the caller's transaction is still usable after a refused batch"
            )
        assert list(Job.objects.values_list("key", flat=True)) == ["after"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER test_refuse_poison ON jobs_job; DROP FUNCTION test_refuse_poison()"
            )


def enqueue_many_then_fail() -> None:
    with transaction.atomic():
        enqueue_many([JobSpec.now("test.record", "x")])
        raise RuntimeError("the caller fails after enqueueing")


def test_a_batch_inside_a_rolled_back_transaction_vanishes_and_wakes_nobody():
    doorbell = wakeup.doorbell.subscribe()
    try:
        with pytest.raises(RuntimeError):
            enqueue_many_then_fail()
        assert not doorbell.is_set(), "a rolled-back batch rings nothing"
        assert not Job.objects.exists()
        enqueue_many([JobSpec.now("test.record", "y")])
        assert doorbell.is_set(), "a committed batch wakes the runners here"
    finally:
        wakeup.doorbell.unsubscribe(doorbell)


def test_an_empty_batch_is_an_empty_answer():
    assert enqueue_many([]) == []
