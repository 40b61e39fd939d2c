"""A workflow grown at run time (`Workflow.of(job)`, then `add` and
`enqueue`): the running step's dependents wait for every step it adds,
recursively; an added step whose dependencies settled already is queued or
cancelled at once, never stranded; and growing from anything but a running
step's attempt, or into a taken name or a cycle, is refused writing nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import QuerySet
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import JobSpec, Workflow, enqueue
from jobs.models import Dependency, Job, State, WorkflowStep
from jobs.store import for_database
from jobs.workflows import release
from jobs.workflows.api import InvalidWorkflow
from tests.helpers import finished_runs
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db(transaction=True)

FLOW, GROW = "test.flow", "test.grow"


def step(key: str, kind: str = FLOW, **payload: Any) -> JobSpec:
    return JobSpec.now(kind, key).with_payload(payload)


def steps() -> QuerySet[Job]:
    return Job.objects.filter(kind__in=[FLOW, GROW])


def states() -> dict[str, str]:
    return dict(steps().values_list("key", "state"))


def grower_then_join(**payload: Any) -> Workflow:
    """A workflow whose step "grower" grows it as `payload` says, and "join" after it."""
    flow = Workflow("growing")
    grower = flow.add(step("grower", GROW, **payload), name="grower")
    flow.add(step("join"), after=[grower], name="join")
    flow.enqueue()
    return flow


def running(key: str, attempts: int = 1) -> Job:
    """The job `key` as its handler's `run()` is given it: claimed, running."""
    Job.objects.filter(key=key).update(state=State.RUNNING, attempts=attempts)
    return Job.objects.get(key=key)


def test_a_running_steps_dependent_waits_for_every_step_it_added(make_runner):
    grower_then_join(count=3)
    make_runner().drain()
    assert states() == dict.fromkeys(["grower", "grower-0", "grower-1", "grower-2", "join"], "done")
    ran = finished_runs()
    last = max(ran[f"grower-{n}"][1] for n in range(3))
    assert ran["join"][0] >= last, "the join starts after every added step finished"
    assert steps().get(key="join").result == {
        "key": "join",
        "saw": ["grower", "test.flow:grower-0", "test.flow:grower-1", "test.flow:grower-2"],
    }, "the dependent waited for the added steps, so it reads their results"


def test_a_step_added_by_an_added_step_holds_the_original_dependent_too(make_runner):
    child = {"kind": GROW, "key": "child", "payload": {"count": 2}}
    grower_then_join(adds=[child])
    make_runner().drain()
    assert set(states().values()) == {"done"}
    ran = finished_runs()
    assert {"child-0", "child-1"} <= set(ran), "the grandchildren ran"
    last = max(ran[key][1] for key in ("child", "child-0", "child-1"))
    assert ran["join"][0] >= last, "the join waits for steps its dependency's steps added"
    join = steps().get(key="join").id
    waited = set(Dependency.objects.filter(step_id=join).values_list("depends_on_id", flat=True))
    assert waited == set(steps().exclude(key="join").values_list("id", flat=True))


def test_an_added_step_after_the_running_step_runs_once_it_is_done(make_runner):
    grower_then_join(adds=[{"key": "after-me", "after": ["@current"]}])
    make_runner().drain()
    ran = finished_runs()
    assert ran["after-me"][0] >= ran["grower"][1], "it waited for the step that added it"
    assert ran["join"][0] >= ran["after-me"][1]


def test_an_added_step_whose_dependency_settled_already_is_queued_at_once():
    flow = Workflow("settled before")
    first = flow.add(step("first"))
    grower = flow.add(step("grower", GROW), after=[first])
    flow.add(step("join"), after=[grower])
    flow.enqueue()
    Job.objects.filter(key="first").update(state=State.DONE)
    Dependency.objects.filter(depends_on_id=first.job_id).update(outcome=State.DONE)

    grown = Workflow.of(running("grower"))
    grown.add(step("late"), after=[grown.step("test.flow:first")])
    assert grown.enqueue() == flow.id, "the grown workflow's id"
    assert states()["late"] == State.QUEUED, "released at once: nothing else will release it"
    late = Job.objects.get(key="late").id
    edge = Dependency.objects.get(step_id=late)
    assert (edge.depends_on_id, edge.outcome) == (first.job_id, State.DONE)
    join = Job.objects.get(key="join").id
    assert Dependency.objects.filter(step_id=join, depends_on_id=late, outcome=None).exists(), (
        "the join waits for the added step"
    )


def test_an_added_step_whose_dependency_failed_already_is_cancelled_at_once_and_so_the_join():
    flow = Workflow("failed before")
    first = flow.add(step("first"))
    grower = flow.add(step("grower", GROW), after=[first], when="settled")
    flow.add(step("join"), after=[grower])
    flow.enqueue()
    Job.objects.filter(key="first").update(state=State.FAILED)
    Dependency.objects.filter(depends_on_id=first.job_id).update(outcome=State.FAILED)

    grown = Workflow.of(running("grower"))
    grown.add(step("late"), after=[grown.step("test.flow:first")])
    grown.enqueue()
    assert states()["late"] == State.CANCELLED, "cancelled by the rule at once"
    assert states()["join"] == State.CANCELLED, "a done-dependent of a cancelled step is cancelled"
    assert Job.objects.get(key="join").last_error == "dependency test.flow:late ended cancelled"
    assert sorted(Abandonment.objects.values_list("key", flat=True)) == ["join", "late"]


def test_a_done_dependent_is_cancelled_when_an_added_step_fails_and_a_settled_one_runs(
    make_runner,
):
    flow = Workflow("fails")
    grower = flow.add(step("grower", GROW, adds=[{"key": "bad", "payload": {"fail": True}}]))
    flow.add(step("join"), after=[grower])
    flow.add(step("report"), after=[grower], when="settled")
    flow.enqueue()
    make_runner().drain()
    assert states() == {
        "grower": State.DONE,
        "bad": State.FAILED,
        "join": State.CANCELLED,
        "report": State.DONE,
    }
    assert steps().get(key="join").last_error == "dependency test.flow:bad ended failed"


def test_enqueue_of_ten_thousand_added_steps_takes_a_bounded_number_of_statements():
    grower_then_join()
    grown = Workflow.of(running("grower"))
    for n in range(10_000):
        grown.add(step(f"row-{n}"))
    with CaptureQueriesContext(connection) as queries:
        grown.enqueue()
    assert steps().filter(state=State.QUEUED).count() == 10_000
    join = Job.objects.get(key="join").id
    assert Dependency.objects.filter(step_id=join).count() == 10_001, "the join waits for each"
    # 10 batches each of jobs, their count, step rows, names looked up, and 20 of edges (each
    # added step's own and the join's): 57 measured, whatever the database.
    assert len(queries) <= 80, f"bulk statements, not one per step: {len(queries)}"


def side_by_side() -> tuple[Workflow, Job]:
    """A workflow whose steps "first" and "grower" both run, and "join" waits for the grower."""
    flow = Workflow("side by side")
    flow.add(step("first"))
    grower = flow.add(step("grower", GROW))
    flow.add(step("join"), after=[grower])
    flow.enqueue()
    running("first")
    return flow, running("grower")


def settle_first() -> None:
    """first ends done, as its settle would write it and move its dependents on."""
    first = Job.objects.get(key="first")
    with transaction.atomic():
        Job.objects.filter(id=first.id).update(state=State.DONE)
        release.settled(for_database(), first.id, State.DONE, timezone.now())


def test_a_step_added_after_a_running_step_is_released_by_that_steps_later_settle():
    _, grower = side_by_side()
    grown = Workflow.of(grower)
    grown.add(step("late"), after=[grown.step("test.flow:first")])
    grown.enqueue()
    assert states()["late"] == State.WAITING, "first still runs"
    settle_first()
    assert states()["late"] == State.QUEUED, "first's settle found the edge the growth wrote"


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite has one writer: no settle is in flight"
)
def test_a_growth_after_a_step_whose_settle_is_in_flight_waits_for_it_and_writes_its_outcome():
    """The settle has read first's dependents (none yet) and not committed: a
    growth that read first as running would write an edge nobody settles.
    It waits on first's row instead, and reads it settled."""
    _, grower = side_by_side()
    settling, commit = threading.Event(), threading.Event()

    def settle_and_hold() -> None:
        try:
            first = Job.objects.get(key="first")
            with transaction.atomic():
                Job.objects.filter(id=first.id).update(state=State.DONE)
                release.settled(for_database(), first.id, State.DONE, timezone.now())
                settling.set()
                commit.wait(10)
        finally:
            connection.close()

    settler = threading.Thread(target=settle_and_hold)
    settler.start()
    assert settling.wait(10)
    grown = Workflow.of(grower)
    grown.add(step("late"), after=[grown.step("test.flow:first")])
    threading.Timer(0.3, commit.set).start()
    grown.enqueue()
    assert commit.is_set(), "the growth waited for the settle to commit"
    settler.join(10)
    assert states()["late"] == State.QUEUED, "written released: first had settled"


# -- Bad input: a clear InvalidWorkflow, nothing written --


def nothing_added(before: int) -> bool:
    return steps().count() == before and WorkflowStep.objects.count() == before


def test_workflow_of_anything_but_a_running_step_is_refused():
    assert enqueue(step("plain"))
    plain = running("plain")
    with pytest.raises(InvalidWorkflow, match="is not a workflow's step"):
        Workflow.of(plain)
    grower_then_join()
    with pytest.raises(InvalidWorkflow, match="is waiting: a workflow grows only from inside"):
        Workflow.of(Job.objects.get(key="join"))
    with pytest.raises(InvalidWorkflow, match="not str"):
        Workflow.of("grower")  # type: ignore[arg-type]


def test_growing_from_an_attempt_that_no_longer_holds_its_step_writes_nothing():
    grower_then_join()
    grown = Workflow.of(running("grower", attempts=1))
    running("grower", attempts=2)  # the lease ran out, and another runner took the row over
    grown.add(step("late"))
    with pytest.raises(InvalidWorkflow, match="no longer runs attempt 1"):
        grown.enqueue()
    assert nothing_added(2)


def test_an_added_step_named_as_an_existing_one_is_refused_writing_nothing():
    grower_then_join()
    grown = Workflow.of(running("grower"))
    grown.add(step("fine"))
    grown.add(step("other"), name="join")
    with pytest.raises(InvalidWorkflow, match="already has a step named 'join'"):
        grown.enqueue()
    assert nothing_added(2)


def test_an_added_step_after_a_step_that_waits_for_the_running_one_is_refused_as_a_cycle():
    grower_then_join()
    grown = Workflow.of(running("grower"))
    grown.add(step("loop"), after=[grown.step("join")])
    with pytest.raises(InvalidWorkflow, match="'join', which waits for the running step"):
        grown.enqueue()
    assert nothing_added(2)


def test_naming_an_unknown_step_or_a_step_of_another_workflow_is_refused():
    grower_then_join()
    grown = Workflow.of(running("grower"))
    with pytest.raises(InvalidWorkflow, match="has no step named 'nope'"):
        grown.step("nope")
    other = Workflow("other")
    foreign = other.add(step("foreign"))
    with pytest.raises(InvalidWorkflow, match="of workflow 'other'"):
        grown.add(step("x"), after=[foreign])
    with pytest.raises(InvalidWorkflow, match="does not grow from a running step"):
        _ = other.current


def test_a_growth_that_adds_no_step_writes_nothing_and_answers_the_workflows_id():
    flow = grower_then_join()
    assert Workflow.of(running("grower")).enqueue() == flow.id
    assert nothing_added(2)


def test_enqueue_answers_none_and_adds_nothing_when_an_added_steps_identity_is_taken():
    grower_then_join()
    assert enqueue(step("taken"))
    grown = Workflow.of(running("grower"))
    grown.add(step("fine"))
    grown.add(step("taken"))
    assert grown.enqueue() is None
    assert set(steps().values_list("key", flat=True)) == {"grower", "join", "taken"}
    assert Dependency.objects.count() == 1, "the join waits for the grower alone"


def test_a_later_growth_may_wait_for_a_step_an_earlier_one_added():
    grower_then_join()
    first = Workflow.of(running("grower"))
    early = first.add(step("early"))
    first.enqueue()
    second = Workflow.of(Job.objects.get(key="grower"))
    second.add(step("late"), after=[early])
    second.enqueue()
    late = Job.objects.get(key="late")
    assert late.state == State.WAITING, "early has not run"
    assert list(
        Dependency.objects.filter(step_id=late.id).values_list("depends_on_id", flat=True)
    ) == [early.job_id]
    join = Job.objects.get(key="join").id
    assert Dependency.objects.filter(step_id=join).count() == 3, "the join waits for all of them"
