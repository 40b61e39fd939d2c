"""Under Django's default `DEBUG = True` a runner's own statements stay out of
the query log nobody reads outside a request; a log someone asked for still
lists them, and an enqueue, which runs inside the caller's request, is listed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext

from jobs import JobSpec, enqueue
from jobs.store.admission import Admission
from tests.integration.store.support import KIND, LEASE, T0, queue

pytestmark = pytest.mark.django_db


def _logged_claims() -> list[str]:
    return [query["sql"] for query in connection.queries if "running" in query["sql"]]


def test_under_debug_a_runners_claim_and_settle_are_kept_out_of_the_query_log(store, settings):
    settings.DEBUG = True
    first = queue("first", run_at=T0 - timedelta(seconds=1))
    second = queue("second")
    reset_queries()

    (claim,) = store.claim(Admission(T0, {KIND: LEASE}, 1))
    settled, (next_claim,) = store.settle_and_claim(
        [(claim.job, None)], Admission(T0, {KIND: LEASE}, 1)
    )

    assert (settled, claim.job.id, next_claim.job.id) == ({first.id}, first.id, second.id)
    assert _logged_claims() == [], "the runner's statements are not in DEBUG's query log"


def test_a_query_log_someone_captures_still_lists_a_runners_claim(store, settings):
    settings.DEBUG = True
    queue("first")

    with CaptureQueriesContext(connection) as captured:
        assert len(store.claim(Admission(T0, {KIND: LEASE}, 1))) == 1

    assert any("running" in query["sql"] for query in captured.captured_queries), (
        "CaptureQueriesContext sees the claim"
    )


def test_under_debug_an_enqueue_is_listed_in_the_query_log_of_the_request_it_ran_in(settings):
    settings.DEBUG = True
    reset_queries()

    assert enqueue(JobSpec.now(KIND, "listed"))

    assert any("INSERT" in query["sql"] for query in connection.queries)
