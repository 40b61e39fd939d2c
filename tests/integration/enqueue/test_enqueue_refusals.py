"""Refusals write nothing: every kind of bad input raises `InvalidJobSpec` before any
SQL runs, and the limits (payload size, the instants a datetime holds) are exact."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from datetime import timezone as tz
from typing import Any

import pytest

from jobs import InvalidJobSpec, JobSpec, enqueue, enqueue_many
from jobs.models import Job
from jobs.spec import JSON_MAX_DEPTH, PAYLOAD_MAX_BYTES
from tests.integration.enqueue.support import T0


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
    pytest.param(spec(queue=""), id="empty-queue"),
    pytest.param(spec(queue="q" * 101), id="queue-too-long"),
    pytest.param(spec(queue="mail queue"), id="queue-with-a-space"),
    pytest.param(spec(queue="mail/eu"), id="queue-with-a-slash"),
    pytest.param(spec(queue="caf\u00e9"), id="queue-not-ascii"),
    pytest.param(spec(queue=5), id="queue-not-a-string"),
    pytest.param(spec(priority=101), id="priority-above-100"),
    pytest.param(spec(priority=-101), id="priority-below-minus-100"),
    pytest.param(spec(priority=True), id="priority-bool"),
    pytest.param(spec(priority=1.5), id="priority-float"),
    pytest.param(spec(priority="1"), id="priority-text"),
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


def _nested(depth: int) -> Any:
    """A payload `depth` levels deep: itself the first, then lists."""
    value: Any = []
    for _ in range(depth - 2):
        value = [value]
    return {"deep": value}


@pytest.mark.django_db
@pytest.mark.parametrize("depth", [32, 5_000], ids=["32-levels", "5000-levels"])
def test_a_payload_nested_past_the_bound_is_invalid_saying_so_and_writes_nothing(depth):
    """Never a RecursionError, nor a database's own refusal (MariaDB's at 32)."""
    spec = JobSpec.now("orders.ship", "deep").with_payload(_nested(depth))
    with pytest.raises(InvalidJobSpec, match=f"nested more than {JSON_MAX_DEPTH} levels deep"):
        enqueue(spec)
    with pytest.raises(InvalidJobSpec, match=f"nested more than {JSON_MAX_DEPTH} levels deep"):
        enqueue_many([JobSpec.now("orders.ship", "fine"), spec])
    assert not Job.objects.exists(), "neither call wrote anything"


@pytest.mark.django_db
def test_a_payload_nested_as_deep_as_the_bound_is_queued_and_read_back_whole():
    payload = _nested(JSON_MAX_DEPTH)
    assert enqueue(JobSpec.now("orders.ship", "one").with_payload(payload))
    assert enqueue_many([JobSpec.now("orders.ship", "many").with_payload(payload)]) == [True]
    for key in ("one", "many"):
        assert Job.objects.get(key=key).payload == payload, "every database stores it whole"


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
