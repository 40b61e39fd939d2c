"""The `Done`s of a pass's steps are settled together, before its claim, with
the releases they make in the same transaction; and a workflow larger than
one statement's rows is written whole (PostgreSQL writes in chunks of 1,000).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from jobs import JobSpec, Workflow
from jobs.models import Dependency, Job, State, WorkflowStep
from jobs.store import Store
from jobs.workflows import release
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"


def step(key: str) -> JobSpec:
    return JobSpec.now(FLOW, key)


def states() -> dict[str, str]:
    return dict(Job.objects.filter(kind=FLOW).values_list("key", "state"))


def test_a_passs_step_dones_are_settled_together_and_the_step_they_release_claimed_in_that_pass(
    make_runner, configure, monkeypatch
):
    configure(max_concurrent=8)
    flow = Workflow("fan")
    head = flow.add(step("head"))
    middle = [flow.add(step(f"m{n}"), after=[head]) for n in range(6)]
    flow.add(step("tail"), after=middle)
    flow.enqueue()
    told: list[list[uuid.UUID]] = []
    real = release.settled_many

    def spied(store: Store, jobs: Any, now: datetime) -> None:
        told.append([job_id for job_id, _ in jobs])
        real(store, jobs, now)

    monkeypatch.setattr(release, "settled_many", spied)
    runner = make_runner()

    runner.run_pass()  # claims the head
    assert wait_until(lambda: runner.completer.waiting() == 1)
    runner.run_pass()  # settles it, releasing the six, and claims them
    assert wait_until(lambda: runner.completer.waiting() == 6)
    runner.run_pass()  # settles the six at once, releasing the tail, and claims it

    assert [len(ids) for ids in told] == [1, 6], "the six middle steps' Dones told at once"
    assert told[1] == sorted(told[1]), "in id order, the order their rows are locked in"
    assert states()["tail"] == State.RUNNING, "released before the pass's claim, and claimed"
    assert wait_until(lambda: runner.completer.waiting() == 1)
    runner.run_pass()
    assert set(states().values()) == {State.DONE}


def test_a_workflow_of_more_steps_than_one_statement_writes_is_written_whole():
    flow = Workflow("wide")
    head = flow.add(step("head"))
    middle = [flow.add(step(f"m{n}"), after=[head]) for n in range(2_100)]
    flow.add(step("tail"), after=middle)

    workflow_id = flow.enqueue()

    assert workflow_id is not None
    jobs = Job.objects.filter(workflow_id=workflow_id)
    assert jobs.count() == 2_102
    assert jobs.filter(state=State.QUEUED).count() == 1, "only the head is queued"
    assert WorkflowStep.objects.filter(workflow_id=workflow_id).count() == 2_102
    assert Dependency.objects.filter(outcome__isnull=True).count() == 4_200
