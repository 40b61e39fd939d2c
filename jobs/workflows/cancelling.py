"""`cancel`: every step of a workflow not settled, retired as `jobs cancel`
retires a job (`jobs.retirement.cancel`: a running step's attempt runs on and
its settle is fenced out), each `abandon` once, in the operator's name.

From the last steps back to the first, dependents before what they wait for:
a cancelled dependency applies the release rule to its dependents
(`jobs.workflows.release`), and one still waiting there would be cancelled
by that cascade, in the workflow's name, instead of by the operator. Going
backwards, each dependent has been cancelled by the time its dependency is,
and the rule leaves it alone; a `when="settled"` step is never released by
a cancel it would then have to race.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import DatabaseError, transaction
from django.utils import timezone

from jobs import retirement
from jobs.models import State
from jobs.registry import Registry
from jobs.registry import registry as default_registry
from jobs.store import Store, for_database
from jobs.store import workflow_reads as reads
from jobs.workflows.ordering import run_order

#: Steps one transaction of a workflow's cancel retires: each goes through
#: the one retirement, a few milliseconds a row (`jobs.bulk.CANCEL_BATCH`).
CANCEL_BATCH = 100

#: How many times a cancel looks again for steps added while it ran (by a
#: running step growing its workflow) before it reports what is left.
CANCEL_ROUNDS = 5

#: Why a step settled before the cancel began was left: "done, already settled".
ALREADY_SETTLED = "already settled"

#: Why a step was left that went away (the sweep) between the read and its cancel.
GONE = "deleted before its cancel"


class UnknownWorkflow(ValueError):
    """An id or prefix that names no workflow, or several."""


@dataclass
class CancelReport:
    """What a workflow's cancel did: how many steps it cancelled (of them, how
    many were running) and why it left the others."""

    workflow_id: uuid.UUID
    cancelled: int = 0
    running: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def __str__(self) -> str:
        text = f"{self.cancelled:,} step{'' if self.cancelled == 1 else 's'} cancelled"
        if self.running:
            text += (
                f" ({self.running:,} of them running: the attempt runs on, its result discarded)"
            )
        if self.skipped:
            most = sorted(self.skipped.items(), key=lambda item: (-item[1], item[0]))
            text += "; skipped " + ", ".join(f"{n:,} ({why})" for why, n in most)
        return text


def cancel(
    workflow_id: uuid.UUID,
    *,
    by: str,
    using: str | None = None,
    registry: Registry | None = None,
) -> CancelReport:
    """Cancel every step of the workflow not settled (waiting, queued or
    running), each through `jobs.retirement.cancel` with `abandon` once, in
    the name of `by`; the settled ones are skipped, each with its state.
    `UnknownWorkflow` when there is no such workflow.

    Dependents go before their dependencies (the module's docstring), a
    batch of `CANCEL_BATCH` a transaction; a running step in a transaction
    of its own, so that its runner settling it at that moment (holding its
    row, waiting for its dependents' rows) never waits on a batch that in
    turn waits on it. Steps a running step adds while this runs are
    cancelled too, looked for again up to `CANCEL_ROUNDS` times.
    """
    store = for_database(using)
    if reads.workflow(store.using, workflow_id) is None:
        raise UnknownWorkflow(f"No workflow has the id {workflow_id}.")
    handlers = registry if registry is not None else default_registry
    report = CancelReport(workflow_id)
    reason = f"cancelled by {by}, with its workflow"
    tried: set[uuid.UUID] = set()
    for _ in range(CANCEL_ROUNDS):
        live = [row for row in reads.live_steps(store.using, workflow_id) if row[0] not in tried]
        if not live:
            break
        tried.update(job_id for job_id, _, _ in live)
        for batch in _batches(_last_first(store.using, workflow_id, live)):
            _cancel_batch(store, batch, handlers, reason, by, report)
    else:
        if left := len(reads.live_steps(store.using, workflow_id)):
            report.skipped[ADDED] += left
    for job_id, state in reads.settled_steps(store.using, workflow_id):
        if job_id not in tried:
            report.skipped[f"{state}, {ALREADY_SETTLED}"] += 1
    return report


#: Why a cancel left steps added while it ran, past its last round.
ADDED = "added while the cancel ran: cancel again"


def _last_first(
    using: str, workflow_id: uuid.UUID, live: list[tuple[uuid.UUID, str, str]]
) -> list[tuple[uuid.UUID, str, str]]:
    """`live` (id, kind, state) with every step before the steps it waits for."""
    names = reads.steps(using, workflow_id)
    edges = ((step.int, dep.int) for step, dep, _ in reads.edges(using, workflow_id))
    epoch = datetime.min.replace(tzinfo=UTC)
    nodes = [(job_id.int, epoch, names.get(job_id, ("",))[0]) for job_id, *_ in live]
    return [live[n] for n in reversed(run_order(nodes, edges))]


def _batches(
    rows: list[tuple[uuid.UUID, str, str]],
) -> Iterator[list[tuple[uuid.UUID, str, str]]]:
    """`rows` in order, `CANCEL_BATCH` at a time, each running step a batch of its own."""
    batch: list[tuple[uuid.UUID, str, str]] = []
    for row in rows:
        if row[2] == State.RUNNING:
            if batch:
                yield batch
            yield [row]
            batch = []
            continue
        batch.append(row)
        if len(batch) == CANCEL_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _cancel_batch(
    store: Store,
    batch: list[tuple[uuid.UUID, str, str]],
    handlers: Registry,
    reason: str,
    by: str,
    report: CancelReport,
) -> None:
    """Retire `batch` in one transaction; if the database gives up on it (a
    deadlock with a runner's settle), one step at a time instead."""
    try:
        left = _retire(store, batch, handlers, reason, by, report)
    except DatabaseError:
        if len(batch) == 1:
            raise
        left = []
        for row in batch:
            left += _retire(store, [row], handlers, reason, by, report)
    if left:
        now_in = reads.states(store.using, left)
        for job_id in left:
            state = now_in.get(job_id)
            why = GONE if state is None else f"{state}, settled before its cancel"
            report.skipped[why] += 1


def _retire(
    store: Store,
    batch: list[tuple[uuid.UUID, str, str]],
    handlers: Registry,
    reason: str,
    by: str,
    report: CancelReport,
) -> list[uuid.UUID]:
    """Each of `batch` through the one retirement, in one transaction; those
    no longer live. The report counts only once the transaction commits."""
    left, cancelled, running = [], 0, 0
    now = timezone.now()
    with transaction.atomic(using=store.using):
        for job_id, kind, state in batch:
            if retirement.cancel(store, job_id, handlers.get(kind), reason, now, by=by) is None:
                left.append(job_id)
            else:
                cancelled += 1
                running += state == State.RUNNING
    report.cancelled += cancelled
    report.running += running
    return left
