"""The wake-up on PostgreSQL: the enqueuing transaction's commit sends it (NOTIFY),
and a rollback or a refused duplicate never does. That it starts a job in a
`runjobs` process at once is tests/acceptance/test_wakeup_postgresql.py."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from jobs import JobSpec, enqueue
from jobs.models import Job
from jobs.store.postgresql.driver import plain_connection_params
from jobs.store.postgresql.sql import WAKEUP_CHANNEL

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]


def listener() -> psycopg.Connection:
    conn = psycopg.connect(**plain_connection_params(connection), autocommit=True)
    conn.execute(f"LISTEN {WAKEUP_CHANNEL}")
    return conn


def heard(conn: psycopg.Connection, timeout: float = 0.5) -> int:
    return sum(1 for _ in conn.notifies(timeout=timeout))


def enqueue_then_fail(key: str) -> None:
    with transaction.atomic():
        assert enqueue(JobSpec.now("test.record", key))
        raise RuntimeError("the view failed after enqueueing")


def test_the_wake_up_is_sent_when_the_enqueuing_transaction_commits_and_never_on_rollback():
    with listener() as conn:
        with transaction.atomic():
            assert enqueue(JobSpec.now("test.record", "kept"))
            assert heard(conn, 0.3) == 0, "nothing is announced before the commit"
        assert heard(conn) == 1, "the commit announced the job"

        with pytest.raises(RuntimeError):
            enqueue_then_fail("dropped")
        assert heard(conn) == 0, "a rolled-back job wakes nobody"
        assert not Job.objects.filter(key="dropped").exists()

        assert not enqueue(JobSpec.now("test.record", "kept"))
        assert heard(conn) == 0, "a refused duplicate wakes nobody"


def test_an_enqueue_sends_its_notice_in_its_insert_and_runs_no_statement_to_notify():
    """`Store.inserts_notify`: the caller asks no notifier for a second NOTIFY,
    a round trip more per enqueue."""
    with CaptureQueriesContext(connection) as queries:
        assert enqueue(JobSpec.now("test.record", "k"))
    notifying = [q["sql"] for q in queries.captured_queries if "pg_notify" in q["sql"]]
    assert len(notifying) == 1, notifying
    assert "INSERT" in notifying[0], "the insert's own statement notifies"
