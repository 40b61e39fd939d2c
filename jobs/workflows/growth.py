"""A workflow grown from inside one of its running steps (`Workflow.of(job)`,
then `add` and `enqueue`): the checks that need the database, and the write,
in the enqueue's transaction. The design note docs/design/workflows.md
("Growth at run time") argues the locks.

The running step's row is locked first and must still be running the same
attempt: its settle, which moves its dependents on, then waits for the growth
to commit and sees every edge it wrote. Each dependent of the running step
gets an edge to each added step, so it waits for them too, and, as an added
step that grows in turn is a step those dependents wait for, recursively. The
existing steps the added ones depend on, and the dependents, are locked in id
order (the order of every settle) and their states read under the lock: a
dependency that settled before is written on its edge with its outcome, and
one settling after finds the new edge when it lists its dependents. An added
step all of whose dependencies already settled is written released (queued),
or cancelled at once by the rule, never left waiting for a settle that will
not come.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from jobs.models import SETTLED_STATES, Dependency, Job, State, WorkflowStep
from jobs.store import Store
from jobs.store import workflow_growth as growth_rows
from jobs.store import workflows as rows
from jobs.workflows import release
from jobs.workflows.errors import InvalidWorkflow


def grow(
    store: Store,
    running: Job,
    jobs: Sequence[Job],
    steps: Sequence[WorkflowStep],
    edges: Sequence[Dependency],
    now: datetime,
) -> bool:
    """Write `jobs` (with their `steps` and `edges`) as steps added by the
    running step `running`, inside the caller's transaction; False, having
    written only jobs the caller must roll back, when a live job holds the
    identity of one of them. Raises `InvalidWorkflow` before writing when the
    attempt no longer runs, a name is taken, or an edge would close a cycle."""
    using, workflow_id = store.using, running.workflow_id
    assert workflow_id is not None  # `Workflow.of` checked it
    held = growth_rows.lock_attempt(using, running.id)
    if held != (State.RUNNING, running.attempts):
        raise InvalidWorkflow(
            f"step {running.id} no longer runs attempt {running.attempts}: "
            "a workflow grows only from the attempt that holds its step"
        )
    names = [step.name for step in steps]
    if taken := growth_rows.taken_names(using, workflow_id, names):
        raise InvalidWorkflow(f"the workflow already has a step named {sorted(taken)[0]!r}")
    added = {job.id for job in jobs}
    existing = {edge.depends_on_id for edge in edges} - added
    _refuse_cycles(using, running.id, existing - {running.id})
    waiting = rows.dependents(using, running.id)
    states = growth_rows.lock_jobs(using, (existing - {running.id}) | set(waiting))
    if gone := existing - {running.id} - set(states):
        raise InvalidWorkflow(f"after names step {sorted(gone)[0]}, whose job is gone")
    for edge in edges:
        state = states.get(edge.depends_on_id)
        edge.outcome = state if state in SETTLED_STATES else None
    cancels = _decide(jobs, steps, edges, added)
    grown = [
        Dependency(step_id=dependent, depends_on_id=job.id) for dependent in waiting for job in jobs
    ]
    if not rows.write_workflow(using, None, jobs, steps, [*edges, *grown]):
        return False
    for job_id in cancels:
        locked = rows.lock_step(using, job_id)
        if locked is not None and locked[0] == State.WAITING:
            _, kind, step = locked
            release.apply(store, job_id, kind, step, rows.edges(using, job_id), now)
    return True


def _refuse_cycles(using: str, running_id: uuid.UUID, named: set[uuid.UUID]) -> None:
    """An added step may not wait for a step that waits for the running step:
    the running step's dependents will wait for the added one, a cycle."""
    if not named:
        return
    if cycle := named & growth_rows.descendants(using, running_id):
        step = sorted(cycle)[0]
        name = rows.step_names(using, [step]).get(step, str(step))
        raise InvalidWorkflow(
            f"after names step {name!r}, which waits for the running step: "
            "the running step's dependents wait for what it adds, so that is a cycle"
        )


def _decide(
    jobs: Sequence[Job],
    steps: Sequence[WorkflowStep],
    edges: Sequence[Dependency],
    added: set[uuid.UUID],
) -> list[uuid.UUID]:
    """Apply the rule to each added step whose dependencies are all existing
    steps that settled: a released one is written queued (due as its spec
    asked); the ids of those to cancel once written, in the order added."""
    outcomes: dict[uuid.UUID, list[str | None]] = {}
    for edge in edges:
        outcome = None if edge.depends_on_id in added else edge.outcome
        outcomes.setdefault(edge.step_id, []).append(outcome)
    cancels = []
    for job, step in zip(jobs, steps, strict=True):
        if job.state != State.WAITING:
            continue
        verdict = release.rule(step.when, outcomes[job.id])
        if verdict == release.RELEASED:
            job.state, job.run_at = State.QUEUED, step.due_at
        elif verdict == release.CANCELLED:
            cancels.append(job.id)
    return cancels
