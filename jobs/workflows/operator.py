"""A workflow as an operator reads it and cancels it: `jobs workflow show`,
`jobs workflow cancel`, and the admin's workflow page.

`describe` reads the whole workflow in a fixed number of statements
(`jobs.store.workflow_reads`), whatever its size, and lays its steps out in
the order they can run (`jobs.workflows.ordering`). `cancel` is in
`jobs.workflows.cancelling`, whose docstring says why it goes backwards.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from jobs import job_ids
from jobs.models import SETTLED_STATES, State
from jobs.models.workflows import WHEN_DONE
from jobs.presentation import telling_line
from jobs.store import workflow_reads as reads
from jobs.store.workflows import WAITING_RUN_AT
from jobs.workflows.cancelling import CancelReport, UnknownWorkflow, cancel
from jobs.workflows.ordering import run_order

__all__ = [
    "CancelReport",
    "StepView",
    "UnknownWorkflow",
    "WorkflowView",
    "cancel",
    "describe",
    "resolve",
]

#: How much of a result's JSON a step's line shows.
RESULT_WIDTH = 120


@dataclass(frozen=True, slots=True)
class StepView:
    """One step of a workflow, as an operator reads it."""

    job_id: uuid.UUID
    name: str
    kind: str
    key: str
    state: str
    when: str
    attempts: int
    max_attempts: int
    queue: str
    priority: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    #: The run_at its spec asked for (`WorkflowStep.due_at`).
    due_at: datetime
    #: When it is due; None while it waits (the row's parked date is never shown).
    run_at: datetime | None
    #: How long its last attempt ran, once settled; None if it never ran.
    duration: timedelta | None
    #: The first line of its `Done` result's JSON, cut to `RESULT_WIDTH`; "" if none.
    result_line: str
    #: The telling line of `last_error`; "" if none.
    error_line: str
    #: Its dependencies, in step order.
    waits_for: tuple[uuid.UUID, ...]
    #: The steps that depend on it, in step order.
    waited_by: tuple[uuid.UUID, ...]
    #: How each dependency settled, as its edge says (None: not yet).
    outcome_by_dependency: dict[uuid.UUID, str | None]

    @property
    def settled(self) -> bool:
        return self.state in SETTLED_STATES

    @property
    def unsettled_dependencies(self) -> int:
        """How many of its dependencies have not settled yet."""
        return sum(outcome is None for outcome in self.outcome_by_dependency.values())


@dataclass(frozen=True, slots=True)
class WorkflowView:
    """A workflow and its steps, in the order they can run."""

    id: uuid.UUID
    name: str
    deadline: datetime | None
    created_at: datetime
    #: Dependencies before dependents; ties by created_at, then name.
    steps: tuple[StepView, ...]
    #: Steps per state, in `State`'s order, only states some step is in.
    counts: dict[str, int]

    @property
    def settled(self) -> bool:
        """Whether every step settled."""
        return all(step.settled for step in self.steps)

    def step(self, job_id: uuid.UUID) -> StepView | None:
        """The step whose job is `job_id`, or None."""
        return next((step for step in self.steps if step.job_id == job_id), None)


# -- reading ---------------------------------------------------------------------


def describe(workflow_id: uuid.UUID, *, using: str | None = None) -> WorkflowView | None:
    """The workflow `workflow_id` with every step, or None if there is no such
    workflow: four statements whatever its size."""
    alias = using or DEFAULT_DB_ALIAS
    row = reads.workflow(alias, workflow_id)
    if row is None:
        return None
    jobs = reads.step_jobs(alias, workflow_id)
    steps = {job_id.int: step for job_id, step in reads.steps(alias, workflow_id).items()}
    edges = [(step.int, dep, outcome) for step, dep, outcome in reads.edges(alias, workflow_id)]
    for job in jobs:
        job["step"] = steps.get(job["id"].int) or (_unnamed(job), WHEN_DONE, job["run_at"])
    positions = run_order(
        [(job["id"].int, job["created_at"], job["step"][0]) for job in jobs],
        ((step, dep.int) for step, dep, _ in edges),
    )
    jobs = [jobs[n] for n in positions]
    # Each step's edges as (position of the other end, its id, outcome), to be
    # sorted on the position alone; an end no longer there goes last.
    position = {job["id"].int: n for n, job in enumerate(jobs)}
    last = len(jobs)
    waits: list[list[tuple[int, uuid.UUID, str | None]]] = [[] for _ in jobs]
    waited: list[list[tuple[int, uuid.UUID, str | None]]] = [[] for _ in jobs]
    for step, dep, outcome in edges:
        at, dep_at = position.get(step), position.get(dep.int, last)
        if at is not None:
            waits[at].append((dep_at, dep, outcome))
            if dep_at != last:
                waited[dep_at].append((at, jobs[at]["id"], outcome))
    views = []
    for at, job in enumerate(jobs):
        name, when, due_at = job["step"]
        dependencies = sorted(waits[at], key=_first)
        views.append(
            StepView(
                job_id=job["id"],
                name=name,
                kind=job["kind"],
                key=job["key"],
                state=job["state"],
                when=when,
                attempts=job["attempts"],
                max_attempts=job["max_attempts"],
                queue=job["queue"],
                priority=job["priority"],
                created_at=job["created_at"],
                started_at=job["started_at"],
                finished_at=job["finished_at"],
                due_at=due_at,
                run_at=_run_at(job),
                duration=_duration(job),
                result_line=_result_line(job),
                error_line=telling_line(job["last_error"] or ""),
                waits_for=tuple(dep for _, dep, _ in dependencies),
                waited_by=tuple(step for _, step, _ in sorted(waited[at], key=_first)),
                outcome_by_dependency={dep: outcome for _, dep, outcome in dependencies},
            )
        )
    counted = Counter(job["state"] for job in jobs)
    return WorkflowView(
        id=row.id,
        name=row.name,
        deadline=row.deadline,
        created_at=row.created_at,
        steps=tuple(views),
        counts={state.value: counted[state.value] for state in State if counted[state.value]},
    )


def _unnamed(job: Mapping[str, Any]) -> str:
    """The name of a job without its step row (edited by hand): "<kind>:<key>"."""
    return f"{job['kind']}:{job['key']}"


def _first(edge: tuple[int, uuid.UUID, str | None]) -> int:
    return edge[0]


def _run_at(job: Mapping[str, Any]) -> datetime | None:
    """When the step is due; None while it waits, whose row holds a parked date."""
    if job["state"] == State.WAITING or job["run_at"] >= WAITING_RUN_AT:
        return None
    run_at: datetime = job["run_at"]
    return run_at


def _duration(job: Mapping[str, Any]) -> timedelta | None:
    started, finished = job["started_at"], job["finished_at"]
    if job["state"] not in SETTLED_STATES or started is None or finished is None:
        return None
    took: timedelta = finished - started
    return max(took, timedelta(0))


def _result_line(job: Mapping[str, Any]) -> str:
    """The first line of a done step's result as JSON, cut to `RESULT_WIDTH`."""
    if job["state"] != State.DONE or job["result"] is None:
        return ""
    text = json.dumps(job["result"], ensure_ascii=False, sort_keys=True, default=str)
    line = text.split("\n", 1)[0]
    return line if len(line) <= RESULT_WIDTH else line[: RESULT_WIDTH - 1] + "…"


def resolve(text: str, *, using: str | None = None) -> uuid.UUID:
    """The workflow `text` names: its whole id, or 8 or more of its first hex
    digits that begin no other workflow's id (hyphens ignored, as the `jobs`
    command reads job ids: `jobs.job_ids`). An id or prefix that names no
    workflow may name a step: its workflow then. `UnknownWorkflow`, saying
    why, for anything else."""
    alias = using or DEFAULT_DB_ALIAS
    try:
        ident = job_ids.parse(text)
    except ValueError:
        raise UnknownWorkflow(
            f"{text!r} is not a workflow id (a UUID such as {uuid.UUID(int=0)}, or its first "
            f"{job_ids.MIN_DIGITS} or more hex digits)"
        ) from None
    condition = job_ids.matching(ident, alias)
    said = str(ident) if isinstance(ident, uuid.UUID) else f"starting {ident}"
    found = reads.workflows_matching(alias, condition, 2)
    if not found:
        found = list(dict.fromkeys(reads.workflows_of_jobs(alias, condition, 2)))
        if not found:
            raise UnknownWorkflow(f"No workflow, nor any step of one, has the id {said}.")
    if len(found) > 1:
        raise UnknownWorkflow(
            f"The id prefix {ident} begins several workflows' ids; give more of its digits."
        )
    return found[0]
