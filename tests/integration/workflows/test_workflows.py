"""Workflows through the public API and an in-process runner: what `enqueue`
writes (and, for bad input, that it writes nothing), the release of a waiting
step in the settle of its last dependency, the cancel of a `when="done"`
chain after a failure with `abandon` once each, and `dependency_results()`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from jobs import InvalidJobSpec, JobSpec, Workflow, enqueue
from jobs.models import Dependency, Job, State, WorkflowStep
from jobs.models import Workflow as WorkflowRow
from jobs.workflows.api import InvalidWorkflow
from tests.jobapp.models import Abandonment, Execution

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"


def step(key: str, **payload: object) -> JobSpec:
    return JobSpec.now(FLOW, key).with_payload(dict(payload))


def nothing_written() -> bool:
    return not (
        Job.objects.exists()
        or WorkflowRow.objects.exists()
        or WorkflowStep.objects.exists()
        or Dependency.objects.exists()
    )


def diamond() -> Workflow:
    flow = Workflow("diamond")
    first = flow.add(step("first"))
    left = flow.add(step("left"), after=[first])
    right = flow.add(step("right"), after=[first])
    flow.add(step("join"), after=[left, right])
    return flow


def steps() -> QuerySet[Job]:
    """The test's jobs (a runner also plans the sweep's occurrence)."""
    return Job.objects.filter(kind=FLOW)


def states() -> dict[str, str]:
    return dict(steps().values_list("key", "state"))


def test_enqueue_queues_the_steps_without_dependencies_and_the_others_wait():
    workflow_id = diamond().enqueue()
    assert workflow_id is not None
    assert states() == {
        "first": State.QUEUED,
        "left": State.WAITING,
        "right": State.WAITING,
        "join": State.WAITING,
    }
    assert set(Job.objects.values_list("workflow_id", flat=True)) == {workflow_id}
    assert WorkflowRow.objects.get().name == "diamond"
    assert Dependency.objects.count() == 4, "one edge per dependency"
    assert set(WorkflowStep.objects.values_list("name", flat=True)) == {
        "test.flow:first",
        "test.flow:left",
        "test.flow:right",
        "test.flow:join",
    }, "a step is named <kind>:<key> by default"


def test_a_waiting_step_holds_its_identity():
    diamond().enqueue()
    assert enqueue(step("join")) is False, "a waiting step is live: it holds its (kind, key)"


def test_enqueue_writes_nothing_and_answers_none_when_a_steps_identity_is_taken():
    assert enqueue(step("right"))
    assert diamond().enqueue() is None
    assert list(Job.objects.values_list("key", flat=True)) == ["right"]
    assert not WorkflowRow.objects.exists(), "nor the workflow"
    assert not Dependency.objects.exists(), "nor its edges"


def test_enqueue_inside_a_transaction_that_rolls_back_writes_nothing():
    def fails_after_enqueue() -> None:
        with transaction.atomic():
            diamond().enqueue()
            raise RuntimeError("the caller's transaction fails")

    with pytest.raises(RuntimeError):
        fails_after_enqueue()
    assert nothing_written()


def test_an_invalid_spec_raises_invalid_job_spec_and_writes_nothing():
    flow = Workflow("bad")
    first = flow.add(step("ok"))
    flow.add(JobSpec.now(FLOW, ""), after=[first])
    with pytest.raises(InvalidJobSpec):
        flow.enqueue()
    assert nothing_written()


def test_after_naming_a_step_of_another_workflow_is_refused_and_writes_nothing():
    other = Workflow("other")
    foreign = other.add(step("foreign"))
    flow = Workflow("mine")
    with pytest.raises(InvalidWorkflow, match="of workflow 'other'"):
        flow.add(step("mine"), after=[foreign])
    assert nothing_written()


def test_a_duplicate_step_name_is_refused():
    flow = Workflow("dup")
    flow.add(step("a"), name="same")
    with pytest.raises(InvalidWorkflow, match="already has a step named 'same'"):
        flow.add(step("b"), name="same")
    flow.add(step("c"))
    with pytest.raises(InvalidWorkflow, match=r"already has a step named 'test\.flow:c'"):
        flow.add(step("c"))


def test_after_holding_something_other_than_a_step_is_refused():
    flow = Workflow("f")
    flow.add(step("a"))
    with pytest.raises(InvalidWorkflow, match="not UUID"):
        flow.add(step("b"), after=[Job().id])  # type: ignore[list-item]
    with pytest.raises(InvalidWorkflow, match="a step is a JobSpec"):
        flow.add("test.flow:c")  # type: ignore[arg-type]


def test_when_other_than_done_or_settled_is_refused():
    flow = Workflow("f")
    first = flow.add(step("a"))
    with pytest.raises(InvalidWorkflow, match="'always'"):
        flow.add(step("b"), after=[first], when="always")


def test_a_workflows_deadline_applies_to_steps_that_set_none_or_a_later_one():
    soon, late, early = (timezone.now() + timedelta(hours=h) for h in (1, 5, 0.5))
    flow = Workflow("deadlines", deadline=soon)
    flow.add(step("none"))
    flow.add(step("late").with_deadline(late))
    flow.add(step("early").with_deadline(early))
    flow.enqueue()
    deadlines = dict(Job.objects.values_list("key", "deadline"))
    assert deadlines == {"none": soon, "late": soon, "early": early}


def test_a_diamond_runs_in_order_and_the_join_once_with_both_results(make_runner):
    diamond().enqueue()
    make_runner().drain()
    assert states() == dict.fromkeys(["first", "left", "right", "join"], State.DONE)
    runs = {}
    for execution in Execution.objects.all():
        assert execution.finished_at is not None, "every step finished"
        runs[execution.key] = (execution.started_at, execution.finished_at)
    assert Execution.objects.filter(key="join").count() == 1, "the join runs once"
    assert runs["left"][0] >= runs["first"][1], "a step starts after its dependency finished"
    assert runs["right"][0] >= runs["first"][1], "a step starts after its dependency finished"
    assert runs["join"][0] >= max(runs["left"][1], runs["right"][1]), "the join after both"
    join = steps().get(key="join")
    assert join.result == {"key": "join", "saw": ["test.flow:left", "test.flow:right"]}


def test_a_failed_dependency_cancels_the_done_chain_abandoning_each_once_and_runs_the_settled_step(
    make_runner,
):
    flow = Workflow("failure")
    first = flow.add(step("first", fail=True))
    second = flow.add(step("second"), after=[first])
    third = flow.add(step("third"), after=[second])
    flow.add(step("report"), after=[first, third], when="settled")
    flow.enqueue()
    make_runner().drain()
    assert states() == {
        "first": State.FAILED,
        "second": State.CANCELLED,
        "third": State.CANCELLED,
        "report": State.DONE,
    }
    assert steps().get(key="second").last_error == "dependency test.flow:first ended failed"
    assert steps().get(key="third").last_error == "dependency test.flow:second ended cancelled"
    abandoned = sorted(Abandonment.objects.values_list("key", flat=True))
    assert abandoned == ["first", "second", "third"], "abandon once for each retired step"
    assert set(Execution.objects.values_list("key", flat=True)) == {"first", "report"}
    assert steps().get(key="report").result == {"key": "report", "saw": []}


def test_a_step_with_a_dependency_still_unsettled_stays_waiting(make_runner):
    flow = Workflow("half")
    done = flow.add(step("done"))
    later = flow.add(step("later").with_delay(timedelta(hours=1)))
    flow.add(step("join"), after=[done, later])
    flow.enqueue()
    make_runner().drain()
    assert states() == {"done": State.DONE, "later": State.QUEUED, "join": State.WAITING}


def test_a_retry_of_a_dependency_releases_nothing_only_its_final_settle_counts(make_runner):
    flow = Workflow("retry")
    first = flow.add(step("first", retry_once=True))
    flow.add(step("second"), after=[first])
    flow.enqueue()
    make_runner().drain()
    assert states() == {"first": State.QUEUED, "second": State.WAITING}, (
        "first is queued for its retry, and second still waits for its final settle"
    )


def test_a_plain_jobs_dependency_results_are_empty(make_runner):
    enqueue(step("plain"))
    make_runner().drain()
    assert steps().get().result == {"key": "plain", "saw": []}
