"""Workflows through real `runjobs` processes: a diamond runs in order with its
join once, on every database; the fan-in race, where several runners
settle a join's last dependencies at the same instant, releases each join
exactly once and never early, on every database; and a step that grows its
workflow by 500 steps holds its dependent until all 500 ran, on every database."""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from django.db import connection

from jobs import JobSpec, Workflow
from jobs.models import Job, State
from tests.helpers import finished_runs, wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"


@pytest.fixture(autouse=True)
def quick_poll(configure) -> None:
    """Idle runners look for released steps every 100 ms."""
    configure(poll_interval_ms=100)


def test_a_diamond_through_runjobs_runs_in_order_and_its_join_once_with_both_results(runjobs):
    flow = Workflow("diamond")
    first = flow.add(JobSpec.now(FLOW, "first"))
    left = flow.add(JobSpec.now(FLOW, "left"), after=[first])
    right = flow.add(JobSpec.now(FLOW, "right"), after=[first])
    flow.add(JobSpec.now(FLOW, "join"), after=[left, right])
    flow.enqueue()

    process = runjobs("--burst")
    assert process.wait(60) == 0, process.output()

    steps = Job.objects.filter(kind=FLOW)
    assert set(steps.values_list("state", flat=True)) == {State.DONE}, process.output()
    runs = finished_runs()
    assert runs["left"][0] >= runs["first"][1], "left starts after first finished"
    assert runs["right"][0] >= runs["first"][1], "right starts after first finished"
    assert runs["join"][0] >= max(runs["left"][1], runs["right"][1]), "the join after both"
    assert steps.get(key="join").result == {
        "key": "join",
        "saw": ["test.flow:left", "test.flow:right"],
    }, "dependency_results() carries both results"


def test_runners_side_by_side_release_each_of_a_hundred_joins_once_after_all_twenty_of_its_steps(
    runjobs,
):
    """100 workflows of 20 parallel steps and one join each, drained by three
    runners at once (two on SQLite, whose writers take turns): settles of a
    join's last two steps race in different processes, and the join must
    still run exactly once, after all 20."""
    for n in range(100):
        flow = Workflow(f"fan-in {n}")
        fan = [flow.add(JobSpec.now(FLOW, f"{n}-{i}")) for i in range(20)]
        flow.add(JobSpec.now(FLOW, f"{n}-join"), after=fan)
        assert flow.enqueue() is not None

    processes = [runjobs() for _ in range(2 if connection.vendor == "sqlite" else 3)]
    joins = Job.objects.filter(kind=FLOW, key__endswith="-join")
    assert wait_until(lambda: joins.filter(state=State.DONE).count() == 100, 120), (
        "every join ran: " + processes[0].output()[-3000:]
    )
    for process in processes:
        process.process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(30) == 0, process.output()

    runs = finished_runs()
    assert len(runs) == 2100, "every step ran exactly once"
    for n in range(100):
        last = max(runs[f"{n}-{i}"][1] for i in range(20))
        assert runs[f"{n}-join"][0] >= last, f"join {n} started after all 20 of its steps"
    pids = Counter(Execution.objects.values_list("pid", flat=True))
    assert len(pids) > 1, f"more than one runner did work: {pids}"


def test_a_step_that_adds_five_hundred_steps_holds_its_dependent_until_all_ran_and_it_runs_once(
    runjobs,
):
    """Grown at run time, through two runners side by side: the 500 added steps
    settle in both processes, and the dependent of the step that added them is
    released by the settle of the last of them, exactly once."""
    flow = Workflow("grow at run time")
    grower = flow.add(JobSpec.now("test.grow", "grower").with_payload({"count": 500}))
    flow.add(JobSpec.now(FLOW, "join"), after=[grower])
    assert flow.enqueue() is not None

    processes = [runjobs() for _ in range(2)]
    join = Job.objects.get(key="join")
    assert wait_until(lambda: Job.objects.get(id=join.id).state == State.DONE, 120), (
        "the join ran: " + processes[0].output()[-3000:]
    )
    for process in processes:
        process.process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(30) == 0, process.output()

    runs = finished_runs()
    added = [runs[f"grower-{n}"] for n in range(500)]
    assert len(runs) == 502, "the step, its 500 steps and the join each ran exactly once"
    assert runs["join"][0] >= max(end for _, end in added), "the join started after all 500"
    assert Job.objects.filter(workflow_id=join.workflow_id, state=State.DONE).count() == 502
    result = Job.objects.get(id=join.id).result
    assert result is not None
    saw = result["saw"]
    assert len(saw) == 501, "the join waited for the step and for each step it added"
