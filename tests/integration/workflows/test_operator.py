"""An operator's read and cancel of a workflow (`jobs.workflows.operator`):
`describe`'s order, counts and lines in a bounded number of statements,
`cancel` retiring every unsettled step once in the operator's name (a running
one as `jobs cancel` retires a running job), and `resolve`.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import JobSpec, Workflow, retirement
from jobs.models import Job, State
from jobs.presentation import telling_line
from jobs.store import for_database
from jobs.store.admission import Admission
from jobs.store.workflows import WAITING_RUN_AT
from jobs.workflows.operator import UnknownWorkflow, cancel, describe, resolve
from tests.jobapp.models import Abandonment, Execution

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"


def step(key: str, **payload: object) -> JobSpec:
    return JobSpec.now(FLOW, key).with_payload(dict(payload))


def names(workflow_id: uuid.UUID | None) -> list[str]:
    assert workflow_id is not None
    view = describe(workflow_id)
    assert view is not None
    return [s.name for s in view.steps]


def states() -> dict[str, str]:
    return dict(Job.objects.filter(kind=FLOW).values_list("key", "state"))


def diamond(name: str = "diamond") -> Workflow:
    flow = Workflow(name)
    first = flow.add(step("first"), name="first")
    left = flow.add(step("left"), after=[first], name="b-left")
    right = flow.add(step("right"), after=[first], name="a-right")
    flow.add(step("join"), after=[left, right], name="join")
    return flow


def test_describe_puts_dependencies_first_and_ties_in_the_order_the_steps_were_added():
    flow = diamond()
    flow.add(step("root"), name="root")  # no dependency: ready at once, but added last
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    assert names(workflow_id) == ["first", "b-left", "a-right", "join", "root"]


def test_describe_breaks_a_tie_of_created_at_by_name():
    workflow_id = diamond().enqueue()
    Job.objects.update(created_at=timezone.now())
    assert names(workflow_id) == ["first", "a-right", "b-left", "join"]


def test_describe_says_who_waits_on_whom_in_step_order_with_each_edges_outcome():
    workflow_id = diamond().enqueue()
    assert workflow_id is not None
    view = describe(workflow_id)
    assert view is not None
    first, left, right, join = view.steps
    assert join.waits_for == (left.job_id, right.job_id)
    assert first.waited_by == (left.job_id, right.job_id)
    assert join.outcome_by_dependency == {left.job_id: None, right.job_id: None}
    assert (first.waits_for, join.waited_by) == ((), ())
    assert join.unsettled_dependencies == 2


def test_describe_counts_steps_per_state_and_gives_each_its_result_error_and_duration(
    make_runner,
):
    flow = Workflow("lines", deadline=timezone.now() + timedelta(days=1))
    flow.add(step("x" * 200), name="long")
    bad = flow.add(step("bad", fail=True), name="bad")
    flow.add(step("after-bad"), after=[bad], name="after-bad")
    later = flow.add(step("later").with_delay(timedelta(hours=1)), name="later")
    flow.add(step("waits"), after=[later], name="waits")
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    make_runner().drain()

    view = describe(workflow_id)
    assert view is not None
    assert (view.name, view.deadline) == ("lines", flow.deadline)
    assert view.counts == {"queued": 1, "done": 1, "failed": 1, "cancelled": 1, "waiting": 1}
    assert not view.settled
    by_name = {s.name: s for s in view.steps}
    long = by_name["long"]
    assert long.result_line.startswith('{"key": "xxx')
    assert len(long.result_line) == 120, "cut to 120 characters"
    assert long.result_line.endswith("…")
    assert long.duration == long.finished_at - long.started_at  # type: ignore[operator]
    assert long.error_line == ""
    failed = Job.objects.get(key="bad")
    assert by_name["bad"].error_line == telling_line(failed.last_error) != ""
    assert by_name["bad"].result_line == ""
    assert by_name["after-bad"].error_line == "dependency bad ended failed"
    assert by_name["after-bad"].duration is None, "it never ran"
    waits = by_name["waits"]
    assert Job.objects.get(key="waits").run_at == WAITING_RUN_AT
    assert waits.run_at is None, "a waiting step's parked date is never shown"
    assert waits.due_at <= timezone.now(), "its own due time is its spec's"
    assert by_name["later"].run_at == Job.objects.get(key="later").run_at


def test_describe_reads_a_workflow_of_300_steps_in_as_many_statements_as_one_of_3():
    def statements(size: int) -> int:
        flow = Workflow(f"fan of {size}")
        first = flow.add(step(f"{size}-first"))
        for n in range(size - 1):
            flow.add(step(f"{size}-{n}"), after=[first])
        workflow_id = flow.enqueue()
        assert workflow_id is not None
        with CaptureQueriesContext(connection) as queries:
            view = describe(workflow_id)
        assert view is not None
        assert len(view.steps) == size
        return len(queries)

    assert statements(3) == statements(300) <= 4


def test_describe_of_no_such_workflow_is_none():
    assert describe(uuid.uuid4()) is None


def test_cancel_cancels_every_unsettled_step_once_in_the_operators_name_and_skips_settled_ones(
    make_runner, caplog
):
    flow = Workflow("cancel me")
    done = flow.add(step("done"))
    later = flow.add(step("later").with_delay(timedelta(hours=1)))
    middle = flow.add(step("middle"), after=[done, later])
    flow.add(step("end"), after=[middle])
    flow.add(step("report"), after=[middle], when="settled")
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    make_runner().drain()
    assert states()["middle"] == State.WAITING

    with caplog.at_level(logging.INFO, logger="jobs"):
        report = cancel(workflow_id, by="alice")

    assert (report.cancelled, report.running) == (4, 0)
    logged = [
        dict(r.fields) for r in caplog.records if getattr(r, "event", None) == "job_cancelled"
    ]
    assert sorted(str(e["job_id"]) for e in logged) == sorted(
        str(i) for i in Job.objects.filter(state=State.CANCELLED).values_list("id", flat=True)
    ), "one job_cancelled line a step"
    assert {e["by"] for e in logged} == {"alice"}, "each logged as by the operator"
    assert report.skipped == Counter({"done, already settled": 1})
    assert str(report) == "4 steps cancelled; skipped 1 (done, already settled)"
    assert states() == {
        "done": State.DONE,
        "later": State.CANCELLED,
        "middle": State.CANCELLED,
        "end": State.CANCELLED,
        "report": State.CANCELLED,
    }, "the settled step is released by no cancel: it is cancelled itself"
    cancelled = Job.objects.filter(state=State.CANCELLED)
    assert set(cancelled.values_list("last_error", flat=True)) == {
        "cancelled by alice, with its workflow"
    }, "each by the operator, none by the release rule's cascade"
    abandoned = Counter(Abandonment.objects.values_list("key", flat=True))
    assert abandoned == Counter(["later", "middle", "end", "report"]), "abandon once each"
    assert not Execution.objects.filter(key="report").exists()


def test_cancel_again_cancels_nothing_and_says_why():
    workflow_id = diamond().enqueue()
    assert workflow_id is not None
    cancel(workflow_id, by="alice")
    again = cancel(workflow_id, by="bob")
    assert again.cancelled == 0
    assert again.skipped == Counter({"cancelled, already settled": 4})
    assert Abandonment.objects.count() == 4, "nobody is told twice"


def test_cancel_treats_a_running_step_as_jobs_cancel_does_its_late_settle_loses():
    workflow_id = diamond().enqueue()
    assert workflow_id is not None
    store = for_database()
    [claim] = store.claim(Admission(timezone.now(), {FLOW: timedelta(minutes=5)}, 1))
    assert claim.job.key == "first"

    report = cancel(workflow_id, by="alice")

    assert (report.cancelled, report.running) == (4, 1)
    assert "1 of them running: the attempt runs on, its result discarded" in str(report)
    assert store.complete(claim.job, timezone.now()) is False, "its done is discarded"
    row = Job.objects.get(id=claim.job.id)
    assert row.state == State.CANCELLED
    [entry] = row.attempt_history
    assert (entry.attempt, entry.outcome) == (1, "cancelled"), "the attempt is on its record"
    assert Counter(Abandonment.objects.values_list("key", flat=True))["first"] == 1


def test_a_batch_the_database_gives_up_on_is_cancelled_again_one_step_at_a_time(monkeypatch):
    workflow_id = diamond().enqueue()
    assert workflow_id is not None
    real, calls = retirement.cancel, []

    def deadlocks_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        if len(calls) == 2:  # the batch's second step: as a deadlock with a runner's settle
            raise OperationalError("deadlock detected")
        return real(*args, **kwargs)

    monkeypatch.setattr(retirement, "cancel", deadlocks_once)
    report = cancel(workflow_id, by="alice")
    assert (report.cancelled, report.skipped) == (4, Counter())
    assert set(states().values()) == {State.CANCELLED}
    abandoned = Counter(Abandonment.objects.values_list("key", flat=True))
    assert abandoned == Counter(["first", "left", "right", "join"]), (
        "the rolled-back batch told nobody; each step is abandoned once, after its own commit"
    )


def test_cancel_of_no_such_workflow_is_refused():
    with pytest.raises(UnknownWorkflow, match="No workflow has the id"):
        cancel(uuid.uuid4(), by="alice")


def with_id(flow: Workflow, workflow_id: str) -> Workflow:
    flow.id = uuid.UUID(workflow_id)
    return flow


def test_resolve_takes_a_whole_id_a_unique_prefix_or_a_steps_id():
    workflow_id = with_id(diamond(), "12345678-9abc-4000-8000-000000000001").enqueue()
    with_id(diamond("other"), "87654321-0000-4000-8000-000000000001")
    assert resolve(str(workflow_id)) == workflow_id
    assert resolve("12345678") == workflow_id
    assert resolve("1234-5678-9A") == workflow_id, "hyphens ignored, any case"
    step_id = Job.objects.get(key="join").id
    assert resolve(str(step_id)) == workflow_id, "a step's id names its workflow"


def test_resolve_refuses_an_ambiguous_prefix_an_unknown_id_and_what_is_not_an_id():
    with_id(diamond(), "12345678-0000-4000-8000-000000000001").enqueue()
    Job.objects.all().delete()  # free the keys for a second diamond
    with_id(diamond(), "12345678-0000-4000-8000-000000000002").enqueue()
    with pytest.raises(UnknownWorkflow, match="begins several workflows' ids"):
        resolve("12345678")
    with pytest.raises(UnknownWorkflow, match="No workflow, nor any step of one"):
        resolve("abcdef01")
    with pytest.raises(UnknownWorkflow, match="is not a workflow id"):
        resolve("nonsense")
