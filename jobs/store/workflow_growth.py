"""The statements of a workflow's growth at run time (`jobs.workflows.growth`;
the design note docs/design/workflows.md, "Growth at run time", says why each
lock is taken).

Apart from `jobs.store.workflows` so that the enqueue's write stays one
function there; the rows are written by it (`write_workflow`). Every statement
over a growth's steps takes at most `BATCH` ids, so ten thousand added steps
cost tens of statements, not thousands.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from jobs.models import Dependency, Job, WorkflowStep
from jobs.models import Workflow as WorkflowRow
from jobs.store.workflows import BATCH


def workflow(using: str, workflow_id: uuid.UUID) -> WorkflowRow | None:
    """The `Workflow` row of `workflow_id`, or None."""
    return WorkflowRow.objects.using(using).filter(id=workflow_id).first()


def step_named(using: str, workflow_id: uuid.UUID, name: str) -> uuid.UUID | None:
    """The job of the step `name` of `workflow_id`, or None."""
    rows = WorkflowStep.objects.using(using).filter(workflow_id=workflow_id, name=name)
    return rows.values_list("job_id", flat=True).first()


def step_name(using: str, job_id: uuid.UUID) -> str | None:
    """The step name of the job `job_id`, or None."""
    rows = WorkflowStep.objects.using(using).filter(job_id=job_id)
    return rows.values_list("name", flat=True).first()


def lock_attempt(using: str, job_id: uuid.UUID) -> tuple[str, int] | None:
    """Lock the row of the running step `job_id` until the transaction ends
    (its settle waits for the growth); its state and attempts, or None."""
    rows = Job.objects.using(using).select_for_update().filter(id=job_id)
    return rows.values_list("state", "attempts").first()


def taken_names(using: str, workflow_id: uuid.UUID, names: Sequence[str]) -> set[str]:
    """Those of `names` a step of `workflow_id` already has."""
    rows = WorkflowStep.objects.using(using).filter(workflow_id=workflow_id)
    taken: set[str] = set()
    for n in range(0, len(names), BATCH):
        chunk = rows.filter(name__in=names[n : n + BATCH])
        taken.update(chunk.values_list("name", flat=True))
    return taken


def lock_jobs(using: str, job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Lock the job rows of `job_ids` in id order (the order every settle
    locks its dependents in) until the transaction ends; the state of each
    still there, read by the locking read, so the latest committed."""
    ordered = sorted(set(job_ids))
    states: dict[uuid.UUID, str] = {}
    for n in range(0, len(ordered), BATCH):
        rows = Job.objects.using(using).select_for_update().filter(id__in=ordered[n : n + BATCH])
        states.update(rows.order_by("id").values_list("id", "state"))
    return states


def descendants(using: str, job_id: uuid.UUID) -> set[uuid.UUID]:
    """Every step that waits for `job_id`, directly or through other steps:
    one statement per level of the graph (and per `BATCH` of its width)."""
    found: set[uuid.UUID] = set()
    level = [job_id]
    while level:
        following: set[uuid.UUID] = set()
        for n in range(0, len(level), BATCH):
            rows = Dependency.objects.using(using).filter(depends_on_id__in=level[n : n + BATCH])
            following.update(rows.values_list("step_id", flat=True))
        level = sorted(following - found)
        found.update(level)
    return found
