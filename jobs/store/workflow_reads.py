"""The reads of an operator's look at one workflow (`jobs.workflows.operator`):
its row, its steps' jobs and step rows, its edges, and which workflow an id
or a prefix of one names.

A fixed number of statements whatever the workflow's size, each an index
range: the jobs by their partial index on `workflow_id`, the step rows by the
leading column of their unique (`workflow_id`, `name`), the edges by the
leading column of their unique (`step_id`, `depends_on_id`) under a subquery
of the step rows. A page of 10,000 steps is four statements, not 10,000.
Apart from `jobs.store.workflows` (the settle's statements, on the runner's
path) so that neither grows past the other's reason to change.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import Q

from jobs.models import LIVE_STATES, Dependency, Job, Workflow, WorkflowStep

#: The fields of a step's job the operator's view reads: never the payload
#: nor the attempt record, which may be large and say nothing on the page.
STEP_JOB_FIELDS = (
    "id",
    "kind",
    "key",
    "state",
    "attempts",
    "max_attempts",
    "queue",
    "priority",
    "run_at",
    "created_at",
    "started_at",
    "finished_at",
    "last_error",
    "result",
)


def workflow(using: str, workflow_id: uuid.UUID) -> Workflow | None:
    """The workflow's own row, or None."""
    return Workflow.objects.using(using).filter(id=workflow_id).first()


def step_jobs(using: str, workflow_id: uuid.UUID) -> list[dict[str, Any]]:
    """Each step's job, as `STEP_JOB_FIELDS`, in no particular order."""
    jobs = Job.objects.using(using).filter(workflow_id=workflow_id)
    return list(jobs.order_by().values(*STEP_JOB_FIELDS))


def steps(using: str, workflow_id: uuid.UUID) -> dict[uuid.UUID, tuple[str, str, datetime]]:
    """Each step's name, rule and own due time, by its job's id."""
    rows = WorkflowStep.objects.using(using).filter(workflow_id=workflow_id).order_by()
    return {
        job_id: (name, when, due_at)
        for job_id, name, when, due_at in rows.values_list("job_id", "name", "when", "due_at")
    }


def edges(using: str, workflow_id: uuid.UUID) -> list[tuple[uuid.UUID, uuid.UUID, str | None]]:
    """Every edge of the workflow, (step, dependency, outcome), in the order
    they were written (a step's dependencies in the order `after` gave them)."""
    ids = WorkflowStep.objects.using(using).filter(workflow_id=workflow_id).values("job_id")
    rows = Dependency.objects.using(using).filter(step_id__in=ids).order_by("id")
    return list(rows.values_list("step_id", "depends_on_id", "outcome"))


def live_steps(using: str, workflow_id: uuid.UUID) -> list[tuple[uuid.UUID, str, str]]:
    """Each step not settled, (id, kind, state): what a workflow's cancel retires."""
    jobs = Job.objects.using(using).filter(workflow_id=workflow_id, state__in=LIVE_STATES)
    return list(jobs.order_by().values_list("id", "kind", "state"))


def settled_steps(using: str, workflow_id: uuid.UUID) -> list[tuple[uuid.UUID, str]]:
    """Each settled step of the workflow, (id, state): what its cancel skips."""
    jobs = Job.objects.using(using).filter(workflow_id=workflow_id).exclude(state__in=LIVE_STATES)
    return list(jobs.order_by().values_list("id", "state"))


def states(using: str, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The state of each of `job_ids` still there."""
    return dict(Job.objects.using(using).filter(id__in=job_ids).values_list("id", "state"))


def workflows_matching(using: str, condition: Q, limit: int) -> list[uuid.UUID]:
    """The ids of at most `limit` workflows whose id meets `condition` (on `id`)."""
    rows = Workflow.objects.using(using).filter(condition).order_by("id")
    return list(rows.values_list("id", flat=True)[:limit])


def workflows_of_jobs(using: str, condition: Q, limit: int) -> list[uuid.UUID]:
    """The workflows of at most `limit` steps whose job's id meets `condition`."""
    rows = Job.objects.using(using).filter(condition, workflow_id__isnull=False).order_by("id")
    return [i for i in rows.values_list("workflow_id", flat=True)[:limit] if i is not None]


def waits_for(
    using: str, step_id: uuid.UUID
) -> tuple[datetime | None, list[tuple[uuid.UUID, str, str | None]]]:
    """A step's own due time (None if it is not a step), and each of its
    dependencies, (id, name, outcome), in the order `after` gave them: what
    `jobs show` says a waiting step waits for. Three statements."""
    due_at = (
        WorkflowStep.objects.using(using)
        .filter(job_id=step_id)
        .values_list("due_at", flat=True)
        .first()
    )
    rows = Dependency.objects.using(using).filter(step_id=step_id).order_by("id")
    edges = list(rows.values_list("depends_on_id", "outcome"))
    named = WorkflowStep.objects.using(using).filter(job_id__in=[dep for dep, _ in edges])
    names = dict(named.values_list("job_id", "name"))
    return due_at, [(dep, names.get(dep, str(dep)), outcome) for dep, outcome in edges]
