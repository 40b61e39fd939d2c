"""The benchmark's raw baselines measure what they say: every row they write is
counted and none is left behind (PostgreSQL only, as the parts are)."""

from __future__ import annotations

import pytest
from django.db import connection

from acmeproxy.benchmarks import bench
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the raw baselines are PostgreSQL's")


def test_the_raw_enqueue_baselines_insert_every_row_and_leave_none_behind():
    one_by_one, bulk = bench.raw_enqueue_rates(25)
    assert one_by_one.numbers["jobs"] == bulk.numbers["jobs"] == 25, "each part counts its rows"
    assert one_by_one.numbers["jobs_per_second"] > 0, "the one-by-one rate is measured"
    assert bulk.numbers["jobs_per_second"] > 0, "the bulk rate is measured"
    assert not Job.objects.filter(kind__startswith="bench.").exists(), "its rows are deleted"


def test_the_per_pass_ceiling_settles_every_row_it_claims_eight_at_a_time():
    result = bench.ceiling_per_pass(50)
    assert result.numbers["jobs"] == 50, "every row was claimed and then settled"
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_ceiling')")
        assert cursor.fetchone() == (None,), "its scratch table is dropped"
