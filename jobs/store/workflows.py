"""The statements of workflows (`jobs.workflows`; the design note
docs/design/workflows.md says why each is shaped as it is).

Written once for every database with the ORM: the locking reads
(`select_for_update`) are what makes a release race-free on MySQL/MariaDB,
where a plain SELECT under REPEATABLE READ reads the transaction's snapshot;
PostgreSQL under READ COMMITTED sees the latest commits either way, and
SQLite, which has no row locks, one writer at a time. PostgreSQL's hot two,
the enqueue's write and a settle's release, have statements of their own
there (`jobs.store.postgresql.workflows`), each one round trip.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from django.db import connections
from django.db.models import Exists, OuterRef, QuerySet

from jobs import config
from jobs.models import Dependency, Job, JobsConfig, State, Workflow, WorkflowStep

#: A waiting step's `run_at`: past every due row, so the claim's range on
#: `run_at` (the ready index, where waiting rows are, being live) stops
#: before it. The step's own due time is on its `WorkflowStep`.
WAITING_RUN_AT = datetime(9999, 1, 1, tzinfo=UTC)


#: Rows a statement of a workflow's enqueue inserts at most.
BATCH = 1000


#: A database's own write of a workflow's rows and own release rule, by
#: vendor: registered by its store's package as it is imported
#: (`jobs.store.postgresql.workflows`), so this module never imports it
#: (that store's statements import the ORM store, which imports this).
WRITES: dict[str, Callable[..., bool]] = {}
SETTLES: dict[
    str,
    Callable[..., tuple[list[tuple[uuid.UUID, str]], list[uuid.UUID]]],
] = {}


def configured_max_attempts(using: str) -> int:
    """The budget a step takes when its spec gives none: the config row's."""
    rows = JobsConfig.objects.using(using).filter(pk=JobsConfig.SINGLETON_ID)
    configured = rows.values_list("max_attempts", flat=True).first()
    return configured if configured is not None else config.initial().max_attempts


def write_workflow(
    using: str,
    workflow: Workflow | None,
    jobs: Sequence[Job],
    steps: Sequence[WorkflowStep],
    edges: Sequence[Dependency],
) -> bool:
    """Write a workflow's rows inside the enqueue's transaction: the
    `Workflow` itself (None when it exists), its step jobs, their step rows and
    edges. False, having written only rows the caller must roll back, when a
    live job already holds the identity of one of `jobs`. PostgreSQL writes
    them all in one round trip (`jobs.store.postgresql.workflows`)."""
    own = WRITES.get(connections[using].vendor)
    if own is not None:
        return own(using, workflow, jobs, steps, edges)
    rows = Job.objects.using(using)
    rows.bulk_create(jobs, batch_size=BATCH, ignore_conflicts=True)
    ids = [job.id for job in jobs]
    inserted = sum(
        rows.filter(id__in=ids[n : n + BATCH]).count() for n in range(0, len(ids), BATCH)
    )
    if inserted != len(jobs):
        return False
    if workflow is not None:
        workflow.save(using=using, force_insert=True)
    WorkflowStep.objects.using(using).bulk_create(steps, batch_size=BATCH)
    Dependency.objects.using(using).bulk_create(edges, batch_size=BATCH)
    return True


def workflow_of(using: str, job_id: uuid.UUID) -> uuid.UUID | None:
    """The workflow the job `job_id` is a step of, or None."""
    return Job.objects.using(using).filter(id=job_id).values_list("workflow_id", flat=True).first()


def dependents(using: str, job_id: uuid.UUID) -> list[uuid.UUID]:
    """The steps that wait for `job_id`, in id order: the order their rows are
    locked in by every settle, so two settles never deadlock each other."""
    rows = Dependency.objects.using(using).filter(depends_on_id=job_id)
    return sorted(rows.values_list("step_id", flat=True))


def lock_step(using: str, step_id: uuid.UUID) -> tuple[str, str, WorkflowStep] | None:
    """Lock the job row of `step_id` until the transaction ends; its state,
    its kind and its step row, or None if either is gone."""
    job = (
        Job.objects.using(using)
        .select_for_update()
        .filter(id=step_id)
        .values_list("state", "kind")
        .first()
    )
    step = WorkflowStep.objects.using(using).filter(job_id=step_id).first()
    if job is None or step is None:
        return None
    return job[0], job[1], step


def settle_edge(using: str, step_id: uuid.UUID, depends_on_id: uuid.UUID, outcome: str) -> None:
    """Write how `depends_on_id` settled on its edge to `step_id` (lock the step first)."""
    Dependency.objects.using(using).filter(step_id=step_id, depends_on_id=depends_on_id).update(
        outcome=outcome
    )


def edges(using: str, step_id: uuid.UUID) -> list[tuple[uuid.UUID, str | None]]:
    """Each dependency of `step_id` with its outcome (None: not settled), read
    with a locking read, which sees the latest commits on every database."""
    rows = Dependency.objects.using(using).select_for_update().filter(step_id=step_id)
    return list(rows.order_by("id").values_list("depends_on_id", "outcome"))


def waits(using: str, step_id: uuid.UUID) -> bool:
    """Whether an edge of `step_id` is not settled yet, read with a locking read
    (the latest commits on every database) that stops at the first: a join of
    10,000 steps is not read whole at each of their settles."""
    rows = Dependency.objects.using(using).select_for_update()
    return rows.filter(step_id=step_id, outcome__isnull=True).exists()


def release(using: str, step_id: uuid.UUID, run_at: datetime, now: datetime) -> bool:
    """Move the waiting `step_id` to queued, due at `run_at`; whether it was waiting."""
    rows = Job.objects.using(using).filter(id=step_id, state=State.WAITING)
    return bool(rows.update(state=State.QUEUED, run_at=run_at, updated_at=now))


def settle_dependents(
    using: str, jobs: Sequence[tuple[uuid.UUID, str]], now: datetime
) -> tuple[list[tuple[uuid.UUID, str]], list[uuid.UUID]] | None:
    """Where the database can, the whole rule for the settled `jobs` (id,
    state) in one round trip: lock their waiting dependents in id order,
    write the edges, release those ready; those released (id, kind), and those the rule
    cancels (for the caller to cancel); the runners listening are told of
    any release at commit. None elsewhere: the caller takes the
    statements below one by one (`jobs.workflows.release.settled_many`)."""
    own = SETTLES.get(connections[using].vendor)
    return None if own is None else own(using, jobs, now)


def dependents_of(using: str, job_ids: Sequence[uuid.UUID]) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The edges to any of `job_ids`, (waiting step, dependency), in the steps'
    id order: the order their rows are locked in by every settle, so two
    settles never deadlock."""
    rows = Dependency.objects.using(using).filter(depends_on_id__in=job_ids)
    return sorted(rows.values_list("step_id", "depends_on_id"))


def lock_steps(
    using: str, step_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[str, str, WorkflowStep]]:
    """Lock the job rows of `step_ids` in id order until the transaction ends;
    each one's state, kind and step row, leaving out any that is gone."""
    jobs = Job.objects.using(using).select_for_update().filter(id__in=step_ids).order_by("id")
    found = {
        job_id: (state, kind) for job_id, state, kind in jobs.values_list("id", "state", "kind")
    }
    steps = WorkflowStep.objects.using(using).filter(job_id__in=list(found))
    return {step.job_id: (*found[step.job_id], step) for step in steps}


def settle_edges(using: str, depends_on_ids: Sequence[uuid.UUID], outcome: str) -> None:
    """Write how each of `depends_on_ids` settled on every edge to it (lock the
    steps first: `lock_steps`)."""
    Dependency.objects.using(using).filter(depends_on_id__in=depends_on_ids).update(outcome=outcome)


def _read_latest(rows: QuerySet[Dependency]) -> set[uuid.UUID]:
    """The step ids of `rows`, read so as to see the latest commits: plainly on
    PostgreSQL (READ COMMITTED) and SQLite, where whoever writes a step's
    edge holds its row's lock first; with a locking read on MySQL/MariaDB,
    whose plain read sees the transaction's snapshot."""
    if rows.db and connections[rows.db].vendor == "mysql":
        return set(rows.select_for_update().values_list("step_id", flat=True))
    return set(rows.values_list("step_id", flat=True).distinct())


#: Steps few enough for MySQL/MariaDB to ask `waits` of each rather than
#: read every unsettled edge of them all in one locking read.
FEW = 16


def with_unsettled_edges(using: str, step_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of `step_ids` (locked) still have an edge not settled.

    Asked per step as "is there one", which stops at the first found: a
    fan-in's last step has an edge per step of the fan, and counting them
    all at each of their settles made its drain quadratic."""
    if connections[using].vendor == "mysql":
        if len(step_ids) <= FEW:  # a locking read that stops at the first, each
            return {step_id for step_id in step_ids if waits(using, step_id)}
        pending = Dependency.objects.using(using).filter(step_id__in=step_ids, outcome=None)
        return _read_latest(pending)
    unsettled = Dependency.objects.using(using).filter(step_id=OuterRef("id"), outcome=None)
    steps = Job.objects.using(using).filter(id__in=step_ids).filter(Exists(unsettled))
    return set(steps.values_list("id", flat=True))


def with_failed_edges(using: str, step_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of `step_ids` (locked, every edge settled) have an edge that did
    not end done: read once per step, when its last edge settles."""
    rows = Dependency.objects.using(using).filter(step_id__in=step_ids).exclude(outcome=State.DONE)
    return _read_latest(rows)


def release_many(using: str, step_ids: Sequence[uuid.UUID], run_at: datetime, now: datetime) -> int:
    """Move the waiting `step_ids` to queued, due at `run_at`; how many were waiting."""
    rows = Job.objects.using(using).filter(id__in=step_ids, state=State.WAITING)
    return rows.update(state=State.QUEUED, run_at=run_at, updated_at=now)


def step_names(using: str, job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The step name of each of `job_ids` that is a step."""
    rows = WorkflowStep.objects.using(using).filter(job_id__in=job_ids)
    return dict(rows.values_list("job_id", "name"))


def live_workflows(using: str) -> QuerySet[Job, uuid.UUID | None]:
    """The workflows with a live step, as a subquery for the sweep: none of
    their settled steps is deleted while a live one may read it."""
    live = Job.objects.using(using).filter(workflow_id__isnull=False, live=True)
    return live.values_list("workflow_id", flat=True)


def forget(using: str, job_ids: Sequence[uuid.UUID], workflow_ids: set[uuid.UUID]) -> None:
    """The sweep deleted the settled steps `job_ids` of `workflow_ids`: delete
    their step rows and edges, and each workflow none of whose jobs is left."""
    WorkflowStep.objects.using(using).filter(job_id__in=job_ids).delete()
    Dependency.objects.using(using).filter(step_id__in=job_ids).delete()
    Dependency.objects.using(using).filter(depends_on_id__in=job_ids).delete()
    left = Job.objects.using(using).filter(workflow_id__in=workflow_ids).values("workflow_id")
    Workflow.objects.using(using).filter(id__in=workflow_ids).exclude(id__in=left).delete()


def stranded(using: str, limit: int) -> list[uuid.UUID]:
    """Waiting steps none of whose dependencies is live (rows edited by hand,
    a restore, a settle from before the workflow's rows): the repair's work."""
    live = Job.objects.using(using).filter(live=True).values("id")
    pending = Dependency.objects.using(using).filter(depends_on_id__in=live).values("step_id")
    waiting = Job.objects.using(using).filter(state=State.WAITING).exclude(id__in=pending)
    return list(waiting.order_by("id").values_list("id", flat=True)[:limit])


def dependency_states(using: str, step_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """The state of each dependency of `step_id` whose job is still there."""
    on = Dependency.objects.using(using).filter(step_id=step_id).values("depends_on_id")
    return dict(Job.objects.using(using).filter(id__in=on).values_list("id", "state"))
