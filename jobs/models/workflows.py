"""The rows of a workflow besides its jobs (`jobs.workflows`, and the design
note docs/design/workflows.md): the `Workflow` itself, one `WorkflowStep` per
step job (its name in the workflow, its rule, its own due time) and one
`Dependency` per edge (its outcome once the dependency settled for good).

Ids rather than foreign keys: the sweep deletes jobs in batches, and a foreign
key would have Django collect and delete the edges one job at a time; a
workflow's rows are swept together instead.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models

#: A step's longest name: "<kind>:<key>" by default (100 + 1 + 255).
STEP_NAME_MAX_LENGTH = 356

#: The rules a step's dependencies are read by.
WHEN_DONE = "done"
WHEN_SETTLED = "settled"
WHENS = (WHEN_DONE, WHEN_SETTLED)


class Workflow(models.Model):
    """A group of step jobs, named for operators, with a deadline its steps inherit."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=255, help_text="A label shown to operators.")
    deadline = models.DateTimeField(
        null=True, blank=True, help_text="The deadline of each step that sets none of its own."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "jobs_workflow"

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class WorkflowStep(models.Model):
    """A job's place in its workflow: its name, its rule and its own due time."""

    job_id = models.UUIDField(primary_key=True, help_text="The step's job.")
    workflow_id = models.UUIDField(help_text="The workflow it is a step of.")
    name = models.CharField(
        max_length=STEP_NAME_MAX_LENGTH,
        help_text="Unique in its workflow; what dependency_results() is keyed by.",
    )
    when = models.CharField(
        max_length=16,
        choices=[(w, w) for w in WHENS],
        default=WHEN_DONE,
        help_text="done: runs once every dependency is done; settled: once every one settled.",
    )
    due_at = models.DateTimeField(
        help_text="The run_at its spec asked for; a released step is due then, or now if later."
    )

    class Meta:
        db_table = "jobs_workflowstep"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_id", "name"], name="jobs_workflowstep_name_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Dependency(models.Model):
    """An edge: `step_id` waits for `depends_on_id`. `outcome` is NULL until
    the dependency settled for good, then its final state."""

    id = models.BigAutoField(primary_key=True)
    step_id = models.UUIDField(help_text="The waiting step's job.")
    depends_on_id = models.UUIDField(help_text="The job it waits for.")
    outcome = models.CharField(  # noqa: DJ001 - NULL: not settled yet
        max_length=16, null=True, blank=True, help_text="How the dependency settled."
    )

    class Meta:
        db_table = "jobs_dependency"
        verbose_name_plural = "dependencies"
        constraints = [
            models.UniqueConstraint(
                fields=["step_id", "depends_on_id"], name="jobs_dependency_pair_unique"
            ),
        ]
        indexes = [models.Index(fields=["depends_on_id"], name="jobs_dependency_on")]

    def __str__(self) -> str:
        return f"{self.step_id} after {self.depends_on_id}"


def dependency_results(jobs: models.QuerySet[Any], step_id: uuid.UUID) -> dict[str, Any]:
    """{step name: result} of the direct dependencies of `step_id` that ended
    done, read through `jobs` (the `Job` rows of its database): three reads."""
    on = Dependency.objects.using(jobs.db).filter(step_id=step_id).values("depends_on_id")
    results = dict(jobs.filter(id__in=on, state="done").values_list("id", "result"))
    steps = WorkflowStep.objects.using(jobs.db).filter(job_id__in=list(results))
    return {name: results[job_id] for job_id, name in steps.values_list("job_id", "name")}
