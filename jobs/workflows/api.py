"""`Workflow` and `Step`: the public way to queue jobs that wait for other jobs.

A `Workflow` is built in memory (`add`), then written in one transaction
(`enqueue`): nothing reaches the database before, so a mistake found while
building (a step of another workflow in `after`, a duplicate name, an unknown
`when`) writes nothing, and an invalid spec or a taken identity found at
`enqueue` rolls every row back. `after` only takes steps already added, so no
cycle can be written. The design note docs/design/workflows.md says why the
rows are shaped as they are.

Inside a running step, `Workflow.of(job)` is the step's workflow, to grow:
`add` then takes its existing steps too (`current`, `step(name)`), and
`enqueue` writes the added steps through `jobs.workflows.growth`, which makes
the running step's dependents wait for them as well.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import models, transaction
from django.db.models.base import ModelState
from django.utils import timezone

from jobs import observers, tracing
from jobs.models import Dependency, Job, State, WorkflowStep
from jobs.models import Workflow as WorkflowRow
from jobs.models.workflows import STEP_NAME_MAX_LENGTH, WHEN_DONE, WHENS
from jobs.queue import routing
from jobs.spec import JobSpec
from jobs.store import for_database
from jobs.store import workflow_growth as growth_rows
from jobs.store.workflows import WAITING_RUN_AT, configured_max_attempts, write_workflow
from jobs.wakeup import wake_runners
from jobs.workflows.errors import InvalidWorkflow
from jobs.workflows.growth import grow

__all__ = ["InvalidWorkflow", "Step", "Workflow"]

#: A workflow's longest name (its column's length).
NAME_MAX_LENGTH = 255


@dataclass(frozen=True, eq=False, slots=True)
class Step:
    """One step of a workflow, as `Workflow.add` hands it back (or, for a
    step already written, `Workflow.current` and `Workflow.step`): what
    `after` takes. `job_id` is its job's id from the moment it is added."""

    job_id: uuid.UUID
    name: str
    workflow: Workflow = field(repr=False)


@dataclass(slots=True)
class _Planned:
    step: Step
    spec: JobSpec
    after: tuple[Step, ...]
    when: str


class _Taken(Exception):
    """A step's identity is held by a live job: roll the whole workflow back."""


class Workflow:
    """Jobs that wait for other jobs, queued together (`add`, then `enqueue`).

    `name` is a label for operators; `deadline`, when given, is the deadline
    of each step that sets none, or a later one. `Workflow.of(job)` is, inside
    a running step, the workflow it is a step of, to add steps to.
    """

    def __init__(self, name: str, *, deadline: datetime | None = None) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX_LENGTH:
            raise InvalidWorkflow(
                f"a workflow's name is a non-blank string of at most {NAME_MAX_LENGTH} "
                f"characters, not {name!r}"
            )
        if deadline is not None and (not isinstance(deadline, datetime) or deadline.tzinfo is None):
            raise InvalidWorkflow(f"a workflow's deadline is an aware datetime, not {deadline!r}")
        self.id = uuid.uuid4()
        self.name, self.deadline = name, deadline
        self._planned: list[_Planned] = []
        self._named: dict[str, Step] = {}
        self._enqueued = False
        #: The running step this workflow grows from (`of`), and its database.
        self._running: Job | None = None
        self._using: str | None = None
        self._current: Step | None = None

    @classmethod
    def of(cls, job: Job) -> Workflow:
        """The workflow of `job`, the running step a handler's `run()` is given,
        to grow: `add` steps (which may wait for its existing steps: `current`,
        `step(name)`), then `enqueue` them. The running step's dependents then
        wait for it and for every step it added, recursively. Two reads. Raises
        `InvalidWorkflow` for anything but a running step."""
        if not isinstance(job, Job):
            raise InvalidWorkflow(
                f"Workflow.of takes the Job a handler's run() is given, not {type(job).__name__}"
            )
        if job.workflow_id is None:
            raise InvalidWorkflow(f"job {job.kind}:{job.key} is not a workflow's step")
        if job.state != State.RUNNING:
            raise InvalidWorkflow(
                f"step {job.kind}:{job.key} is {job.state}: a workflow grows only "
                "from inside a running step"
            )
        using = job._state.db or for_database().using
        row = growth_rows.workflow(using, job.workflow_id)
        name = growth_rows.step_name(using, job.id)
        if row is None or name is None:
            raise InvalidWorkflow(f"the workflow of step {job.kind}:{job.key} is gone")
        flow = cls(row.name, deadline=row.deadline)
        flow.id, flow._running, flow._using = row.id, job, using
        flow._current = Step(job.id, name, flow)
        return flow

    @property
    def current(self) -> Step:
        """The running step this workflow grows from (`of`): an added step
        after it runs once it is done."""
        if self._current is None:
            raise InvalidWorkflow(f"workflow {self.name!r} does not grow from a running step")
        return self._current

    def step(self, name: str) -> Step:
        """The step `name`: one added here, or, in a workflow grown from a
        running step (`of`), one already written (a read)."""
        if name in self._named:
            return self._named[name]
        job_id = None
        if self._using is not None:
            job_id = growth_rows.step_named(self._using, self.id, name)
        if job_id is None:
            raise InvalidWorkflow(f"workflow {self.name!r} has no step named {name!r}")
        return Step(job_id, name, self)

    def add(
        self,
        spec: JobSpec,
        *,
        after: Iterable[Step] = (),
        when: str = WHEN_DONE,
        name: str | None = None,
    ) -> Step:
        """Add `spec` as a step that runs after each step of `after` (`when`
        "done": once all are done; "settled": once all settled, whatever the
        outcome). `name`, unique in the workflow, defaults to "<kind>:<key>".
        In a workflow grown from a running step, `after` may also name steps
        already written (`current`, `step(name)`), but none that waits for the
        running step (a cycle: `enqueue` refuses it)."""
        if self._enqueued:
            raise InvalidWorkflow(f"workflow {self.name!r} is already enqueued")
        if not isinstance(spec, JobSpec):
            raise InvalidWorkflow(f"a step is a JobSpec, not {type(spec).__name__}")
        if when not in WHENS:
            raise InvalidWorkflow(f'when is "done" or "settled", not {when!r}')
        if isinstance(after, Step):
            after = (after,)
        before = tuple(after)
        for step in before:
            if not isinstance(step, Step):
                raise InvalidWorkflow(
                    f"after holds the Steps Workflow.add returned, not {type(step).__name__}"
                )
            if step.workflow is not self and step.workflow.id == self.id:
                if not step.workflow._enqueued:
                    raise InvalidWorkflow(
                        f"after names step {step.name!r} of a growth not enqueued yet"
                    )
            elif step.workflow is not self:
                raise InvalidWorkflow(
                    f"after names step {step.name!r} of workflow {step.workflow.name!r}, "
                    f"not of {self.name!r}"
                )
        if name is None:
            name = f"{spec.kind}:{spec.key}"
        if not isinstance(name, str) or not name or len(name) > STEP_NAME_MAX_LENGTH:
            raise InvalidWorkflow(
                f"a step's name is a non-empty string of at most {STEP_NAME_MAX_LENGTH} "
                f"characters, not {name!r}"
            )
        if name in self._named:
            raise InvalidWorkflow(f"workflow {self.name!r} already has a step named {name!r}")
        step = Step(uuid.uuid4(), name, self)
        self._named[name] = step
        unique = tuple({each.job_id: each for each in before}.values())
        self._planned.append(_Planned(step, spec, unique, when))
        return step

    def enqueue(self, *, using: str | None = None) -> uuid.UUID | None:
        """Write every step in one transaction (the caller's, inside `atomic()`)
        and answer the workflow's id; None, writing nothing, when a live job
        already holds the `(kind, key)` of any step. Steps without dependencies
        are queued, the others wait. Raises `InvalidJobSpec` for an invalid
        spec, writing nothing.

        Grown from a running step (`of`), it writes the added steps to its
        workflow, in the step's database unless `using` says otherwise, and
        each dependent of the running step waits for them too; an added step
        whose dependencies all settled already is queued, or cancelled by the
        rule, at once; with no step added it writes nothing and answers the
        id all the same. Raises `InvalidWorkflow`, writing nothing, when the
        attempt no longer holds its step, a name is taken in the workflow, or
        `after` names a step that waits for the running step."""
        if self._enqueued:
            raise InvalidWorkflow(f"workflow {self.name!r} is already enqueued")
        if not self._planned and self._running is not None:
            self._enqueued = True
            return self.id  # a step that found nothing to add: nothing to write
        if not self._planned:
            raise InvalidWorkflow(f"workflow {self.name!r} has no step")
        specs = [self._with_deadline(planned.spec) for planned in self._planned]
        for spec in specs:
            spec.validate()  # InvalidJobSpec before anything is written
        store, now = for_database(using or self._using), timezone.now()
        try:
            with transaction.atomic(using=store.using):
                jobs = self._jobs(specs, now, configured_max_attempts(store.using))
                steps, edges = self._steps(specs), self._edges()
                if self._running is not None:
                    written = grow(store, self._running, jobs, steps, edges, now)
                else:
                    workflow = WorkflowRow(
                        id=self.id, name=self.name, deadline=self.deadline, created_at=now
                    )
                    written = write_workflow(store.using, workflow, jobs, steps, edges)
                if not written:
                    raise _Taken
        except _Taken:
            return None
        self._enqueued = True
        wake_runners(store.using)
        observers.enqueued(jobs, store.using)
        return self.id

    def _with_deadline(self, spec: JobSpec) -> JobSpec:
        if self.deadline is None or (spec.deadline is not None and spec.deadline <= self.deadline):
            return spec
        return spec.with_deadline(self.deadline)

    def _jobs(self, specs: list[JobSpec], now: datetime, max_attempts: int) -> list[Job]:
        traceparent = tracing.traceparent()
        defaults = _defaults(Job)
        jobs = []
        for planned, spec in zip(self._planned, specs, strict=True):
            queue, priority = routing(spec)
            waits = bool(planned.after)
            jobs.append(
                _built(
                    Job,
                    defaults,
                    id=planned.step.job_id,
                    kind=spec.kind,
                    key=spec.key,
                    payload=spec.payload,
                    state=State.WAITING if waits else State.QUEUED,
                    max_attempts=max_attempts if spec.max_attempts is None else spec.max_attempts,
                    run_at=WAITING_RUN_AT if waits else spec.run_at,
                    deadline=spec.deadline,
                    queue=queue,
                    priority=priority,
                    traceparent=traceparent,
                    workflow_id=self.id,
                    created_at=now,
                    updated_at=now,
                    errors=[],
                )
            )
        return jobs

    def _steps(self, specs: list[JobSpec]) -> list[WorkflowStep]:
        defaults = _defaults(WorkflowStep)
        return [
            _built(
                WorkflowStep,
                defaults,
                job_id=planned.step.job_id,
                workflow_id=self.id,
                name=planned.step.name,
                when=planned.when,
                due_at=spec.run_at,
            )
            for planned, spec in zip(self._planned, specs, strict=True)
        ]

    def _edges(self) -> list[Dependency]:
        defaults = _defaults(Dependency)
        return [
            _built(Dependency, defaults, step_id=planned.step.job_id, depends_on_id=before.job_id)
            for planned in self._planned
            for before in planned.after
        ]


def _defaults(model: type[models.Model]) -> dict[str, Any]:
    """Each field of `model` at its default, for `_built`: read once per enqueue."""
    return {field.attname: field.get_default() for field in model._meta.concrete_fields}


def _built[Row: models.Model](model: type[Row], defaults: dict[str, Any], **values: Any) -> Row:
    """`model(**values)` without Django's field-by-field `__init__`, which was a
    third of a 10,000-step enqueue: every field at `defaults` (shared: give a
    field whose default is mutable its own value in `values`), then `values`."""
    row = model.__new__(model)
    row.__dict__.update(defaults)
    row.__dict__.update(values)
    row._state = ModelState()
    return row
