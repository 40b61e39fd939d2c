"""`manage.py jobs` takes a job's id as an operator copies it: whole, or its first
8 or more hex digits while only one job's id begins with them.

The ids below are chosen: two share their first 8 digits; two sit at the very
ends of the range that `3f00a957` begins (all zeros, all f's after it), with
neighbours just outside it on either side; and one holds `3f00a956` further
in, which a prefix must not find. How each database stores an id differs
(`jobs.job_ids`), so these run on every database.
"""

from __future__ import annotations

import re
import uuid
from functools import partial

import pytest
from django.core.management.base import CommandError
from django.db import connection

from jobs import job_ids
from jobs.models import Job
from tests import factories
from tests.integration.cli.test_cli import jobs

pytestmark = pytest.mark.django_db

make_job = partial(factories.make_job, leased=False)

FIRST = uuid.UUID("3f00a956-1c2d-4e5f-8a9b-0123456789ab")
SECOND = uuid.UUID("3f00a956-ffff-4e5f-8a9b-0123456789ab")
LOWEST = uuid.UUID("3f00a957-0000-0000-0000-000000000000")
HIGHEST = uuid.UUID("3f00a957-ffff-ffff-ffff-ffffffffffff")
BELOW = uuid.UUID("3f00a956-ffff-ffff-ffff-ffffffffffff")
ABOVE = uuid.UUID("3f00a958-0000-0000-0000-000000000000")
INSIDE = uuid.UUID("00000000-0000-4000-8000-3f00a9560000")


def test_a_unique_prefix_of_8_hex_digits_names_its_job_for_show():
    job = make_job("k1", id=uuid.UUID("5e1ec7ed-0000-4000-8000-000000000001"))
    make_job("k2", id=INSIDE)

    status, output = jobs("show", "5e1ec7ed")

    assert status == 0
    assert re.search(rf"^id:\s+{job.id}$", output, re.M), output


@pytest.mark.parametrize("given", ["3f00a956-1c2d", "3F00A9561C2D", "3f00-a956-1c2d-4e"])
def test_a_prefix_is_read_as_pasted_hyphens_anywhere_and_in_any_case(given):
    make_job("first", id=FIRST)
    make_job("second", id=SECOND)

    status, output = jobs("show", given)

    assert status == 0
    assert re.search(rf"^id:\s+{FIRST}$", output, re.M), output


def test_retry_and_cancel_and_run_now_act_on_the_one_job_a_prefix_names():
    failed = make_job("k1", state="failed", attempts=5, id=FIRST)
    queued = make_job("k2", id=ABOVE)
    make_job("k3", id=INSIDE)

    assert jobs("retry", "3f00a956") == (0, "1 touched\n")
    assert jobs("run-now", "3f00a958") == (0, "1 touched\n")
    assert jobs("cancel", "3f00a958", "--by", "alice") == (0, "1 touched\n")

    assert Job.objects.get(id=failed.id).state == "queued", "retry found the job by its prefix"
    assert Job.objects.get(id=queued.id).state == "cancelled", "so did cancel"
    assert Job.objects.get(id=INSIDE).state == "queued", "a prefix matches where an id begins"


def test_a_prefix_and_the_whole_id_of_one_job_act_on_it_once():
    make_job("k1", state="failed", attempts=5, id=FIRST)
    assert jobs("retry", "3f00a956-1c2d", str(FIRST)) == (0, "1 touched\n")


def test_a_prefix_finds_the_ids_at_both_ends_of_its_range_and_none_past_them():
    for key, ident in [("lowest", LOWEST), ("highest", HIGHEST), ("below", BELOW)]:
        make_job(key, id=ident)
    make_job("above", id=ABOVE)

    with pytest.raises(CommandError) as refused:
        jobs("show", "3f00a957")

    listed = set(re.findall(r"^  (\S+)", str(refused.value), re.M))
    assert listed == {str(LOWEST), str(HIGHEST)}, "the range is inclusive at both ends, and no more"


def test_an_ambiguous_prefix_lists_the_jobs_it_begins_exits_2_and_acts_on_none():
    make_job("first", state="failed", attempts=5, id=FIRST)
    make_job("second", kind="test.sleep", id=SECOND)
    other = make_job("other", state="failed", attempts=5, id=ABOVE)

    with pytest.raises(CommandError) as refused:
        jobs("retry", str(other.id), "3f00a956")

    assert refused.value.returncode == 2, "an id the operator must change, as argparse's are"
    lines = str(refused.value).splitlines()
    assert lines[0] == "The id prefix 3f00a956 begins 2 jobs' ids; give more of its digits:"
    assert re.fullmatch(rf"  {FIRST}\s+failed\s+test\.record\s+first", lines[1]), lines
    assert re.fullmatch(rf"  {SECOND}\s+queued\s+test\.sleep\s+second", lines[2]), lines
    assert Job.objects.get(id=other.id).state == "failed", "nothing is retried, not even the rest"


def test_an_ambiguous_prefix_lists_ten_of_the_jobs_it_begins_and_says_there_are_more():
    for n in range(12):
        make_job(f"k{n}", id=uuid.UUID(f"3f00a956-0000-4000-8000-{n:012x}"))

    with pytest.raises(CommandError) as refused:
        jobs("show", "3f00a956")

    lines = str(refused.value).splitlines()
    assert lines[0].startswith("The id prefix 3f00a956 begins more than 10 jobs' ids")
    assert len(lines) == 1 + 10


def test_a_prefix_of_7_hex_digits_is_refused_by_the_parser():
    make_job("k1", id=FIRST)

    with pytest.raises(CommandError, match=r"'3f00a95' is too short to find a job by: give at"):
        jobs("show", "3f00a95")


def test_a_prefix_no_job_begins_is_not_found_as_a_whole_id_is():
    make_job("k1", state="failed", attempts=5, id=FIRST)

    with pytest.raises(CommandError, match=r"^No job has the id starting 3f00a959\.$") as missing:
        jobs("show", "3f00a959")
    assert missing.value.returncode == 1, "as for a whole id no job has"
    assert jobs("retry", "3f00a959", str(FIRST)) == (1, "1 touched; skipped 1 (no such job)\n")


@pytest.mark.skipif(
    connection.vendor == "mysql",
    reason="MariaDB's uuid sorts the id's first digits last: a prefix is a scan there",
)
def test_a_prefix_is_found_by_a_range_on_the_primary_key():
    """A prefix on a table of a million jobs is read from the index, not the table."""
    make_job("k1", id=FIRST)
    found = Job.objects.filter(job_ids.matching(job_ids.IdPrefix("3f00a956"), "default"))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
        plan = found.values_list("id").explain()
    if connection.vendor == "postgresql":
        assert re.search(r"Index Only Scan using \w+pkey", plan), plan
        assert "Index Cond: ((id >= " in plan, plan
    else:
        assert re.search(r"SEARCH jobs_job USING COVERING INDEX \w+ \(id>\? AND id<\?\)", plan), (
            plan
        )
