"""`runjobs --queue NAME=N`: a queue gets at most N of a runner's slots; the
other queues it serves take the rest."""

from __future__ import annotations

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Job
from jobs.runner import admission

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_capped_queue_holds_at_most_its_cap_of_the_runners_slots_and_others_take_the_rest(
    registry, blocked, make_runner
):
    for n in range(4):
        assert enqueue(JobSpec(kind="test.blocks", key=f"mail{n}", queue="emails"))
        assert enqueue(JobSpec(kind="test.blocks", key=f"report{n}", queue="reports"))
    runner = make_runner(registry=registry, queues=["emails", "reports"], queue_caps={"emails": 1})

    claimed, free = runner.run_pass()

    assert (claimed, free) == (5, 8), "one of emails, then four of reports, of eight slots"
    assert Job.objects.filter(queue="emails", state="running").count() == 1
    assert Job.objects.filter(queue="reports", state="running").count() == 4
    assert runner.run_pass()[0] == 0, "emails has used its one slot; reports is empty"
    blocked.release.set()
    runner.drain()
    assert sorted(key for key, _ in blocked.runs) == sorted(
        [f"mail{n}" for n in range(4)] + [f"report{n}" for n in range(4)]
    )


def test_a_queues_cap_is_shared_between_lanes_adding_up_to_it():
    assert [admission.lane_shares({"emails": 3}, lane, 2) for lane in (0, 1)] == [
        {"emails": 2},
        {"emails": 1},
    ]
