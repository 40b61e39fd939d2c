"""A workflow's repair and its retention: a waiting step whose dependencies
all settled without moving it on (rows edited by hand, a restore) is released
or cancelled by a recovering runner, logged `workflow_repaired`; the sweep
never deletes a settled step a live step of its workflow may still read, and
deletes a finished workflow's rows together."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import JobSpec, Workflow
from jobs.models import Dependency, Job, State, WorkflowStep
from jobs.models import Workflow as WorkflowRow
from jobs.store import for_database
from jobs.workflows import hook
from jobs.workflows.api import Step

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"


def chain(*keys: str, when: str = "done") -> Workflow:
    """A workflow of `keys`, each step after the one before."""
    flow = Workflow("chain")
    before = None
    for key in keys:
        after: list[Step] = [] if before is None else [before]
        before = flow.add(JobSpec.now(FLOW, key), after=after, when=when)
    flow.enqueue()
    return flow


def state(key: str) -> str:
    return Job.objects.get(kind=FLOW, key=key).state


def settle_by_hand(key: str, state: str) -> None:
    """Settle a job as an UPDATE typed by hand would: no hook runs."""
    Job.objects.filter(kind=FLOW, key=key).update(state=state, finished_at=timezone.now())


def repaired_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        dict(r.fields)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", None) == "workflow_repaired"
    ]


def test_a_waiting_step_whose_dependency_was_settled_by_hand_is_released_by_the_repair(caplog):
    chain("first", "second")
    settle_by_hand("first", State.DONE)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        hook.hook.upkeep("default")
    assert state("second") == State.QUEUED, "released by the repair"
    assert [e["outcome"] for e in repaired_events(caplog)] == ["released"]
    assert Job.objects.get(key="second").run_at <= timezone.now(), "due now, not at year 9999"


def test_the_repair_cancels_a_done_step_whose_dependency_failed_by_hand(caplog):
    chain("first", "second", "third")
    settle_by_hand("first", State.FAILED)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        hook.hook.upkeep("default")
    assert (state("second"), state("third")) == (State.CANCELLED, State.CANCELLED), (
        "the cancel's own settle moves the rest of the chain on"
    )
    assert [e["outcome"] for e in repaired_events(caplog)] == ["cancelled"]


def test_the_repair_leaves_a_step_whose_dependency_is_still_live(caplog):
    chain("first", "second")
    with caplog.at_level(logging.WARNING, logger="jobs"):
        hook.hook.upkeep("default")
    assert state("second") == State.WAITING
    assert repaired_events(caplog) == []


def test_the_sweep_keeps_a_settled_step_while_a_step_of_its_workflow_is_live():
    chain("first", "second")
    settle_by_hand("first", State.DONE)
    later = timezone.now() + timedelta(days=1)
    assert for_database().prune(later, 100) == 0, "second (waiting) may still read first"
    assert Job.objects.filter(key="first").exists()


def test_the_sweep_deletes_a_finished_workflows_rows_together():
    chain("first", "second")
    settle_by_hand("first", State.DONE)
    settle_by_hand("second", State.DONE)
    later = timezone.now() + timedelta(days=1)
    assert for_database().prune(later, 100) == 2
    assert not Job.objects.exists()
    assert not WorkflowStep.objects.exists(), "its step rows go with its jobs"
    assert not Dependency.objects.exists(), "its edges too"
    assert not WorkflowRow.objects.exists(), "and the workflow itself"
