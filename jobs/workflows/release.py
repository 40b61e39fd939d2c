"""The rule that moves a waiting step on, applied inside the transaction of
each final settle of a step it waits for (`jobs.workflows.hook`), so the
release commits if and only if the settle does: a crash leaves both or neither.

For each dependent of the settled job, in id order (one lock order for every
settle, so two never deadlock): its job row is locked, the edge written, and
whether any edge is still unsettled read with a locking read
(`jobs.store.workflows`), which stops at the first it finds. Two
runners settling its last two dependencies at once are serialised on that
lock, and the second sees the first's edge: it is released exactly once, never
early. The design note docs/design/workflows.md argues it per database.

- `when="done"`: released once every edge is done; cancelled, its `abandon`
  owed and paid once (`jobs.retirement.cancel`), as soon as one ended failed
  or cancelled, and that cancel's own settle applies the rule to its
  dependents in turn.
- `when="settled"`: released once no edge is unsettled.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from jobs import log, retirement
from jobs.models import SETTLED_STATES, State, WorkflowStep
from jobs.models.workflows import WHEN_DONE
from jobs.registry import registry
from jobs.store import Store
from jobs.store import workflows as rows
from jobs.wakeup import wake_runners

#: Who the cancel of a step names, in its log line.
BY = "workflow"


def settled(store: Store, job_id: uuid.UUID, state: str, now: datetime) -> None:
    """The step `job_id` settled for good as `state`: apply the rule to each
    step waiting for it, inside the caller's transaction."""
    released = False
    for step_id in rows.dependents(store.using, job_id):
        released |= _follow(store, step_id, job_id, state, now)
    if released:
        wake_runners(store.using)


def _follow(
    store: Store, step_id: uuid.UUID, depends_on: uuid.UUID, state: str, now: datetime
) -> bool:
    """Apply the rule to `step_id`, one of whose dependencies settled; whether it was released.

    Only this edge's outcome and whether another edge is unsettled are read:
    a waiting step has no edge that failed it (that edge's own settle, the
    growth that wrote it or a repair cancelled it then), so the rest are done,
    or settled for a `when="settled"` step."""
    locked = rows.lock_step(store.using, step_id)
    rows.settle_edge(store.using, step_id, depends_on, state)
    if locked is None or locked[0] != State.WAITING:
        return False  # gone, cancelled by an operator, or released by a repair
    _, kind, step = locked
    fails = step.when == WHEN_DONE and state != State.DONE
    if not fails and rows.waits(store.using, step_id):
        return False
    return apply(store, step_id, kind, step, [(depends_on, state)], now) == RELEASED


#: What the rule did to a step (`apply`); "" when it still waits.
RELEASED, CANCELLED = "released", "cancelled"


def rule(when: str, outcomes: Sequence[str | None]) -> str:
    """What the rule makes of a waiting step whose edges hold `outcomes` (None:
    not settled): `CANCELLED`, `RELEASED`, or "" while it still waits. Pure, so
    a growth decides a step whose dependencies all settled before it is written."""
    if when == WHEN_DONE and any(outcome not in (None, State.DONE) for outcome in outcomes):
        return CANCELLED
    return "" if any(outcome is None for outcome in outcomes) else RELEASED


def apply(
    store: Store,
    step_id: uuid.UUID,
    kind: str,
    step: WorkflowStep,
    edges: Sequence[tuple[uuid.UUID, str | None]],
    now: datetime,
) -> str:
    """Release or cancel the locked waiting `step_id` as its `edges` say."""
    verdict = rule(step.when, [outcome for _, outcome in edges])
    if verdict == CANCELLED:
        dep, outcome = next((d, o) for d, o in edges if o not in (None, State.DONE))
        names = rows.step_names(store.using, [dep])
        reason = f"dependency {names.get(dep, str(dep))} ended {outcome}"
        retirement.cancel(store, step_id, registry.get(kind), reason, now, by=BY)
        return CANCELLED
    if not verdict:
        return ""
    if not rows.release(store.using, step_id, max(now, step.due_at), now):
        return ""
    log.event(
        "workflow_step_released",
        logging.DEBUG,
        outcome="released",
        job_id=step_id,
        kind=kind,
        step=step.name,
    )
    return RELEASED


#: Stranded steps a repair looks at in one call.
REPAIR_BATCH = 500


def repair(store: Store, now: datetime) -> int:
    """Find waiting steps none of whose dependencies is live, and release or
    cancel each by the rule, each in a transaction of its own, logging
    `workflow_repaired`; how many were. A dependency whose job is gone
    counts as its edge says, or as cancelled when the edge says nothing."""
    repaired = 0
    for step_id in rows.stranded(store.using, REPAIR_BATCH):
        with transaction.atomic(using=store.using):
            locked = rows.lock_step(store.using, step_id)
            if locked is None or locked[0] != State.WAITING:
                continue
            _, kind, step = locked
            states = rows.dependency_states(store.using, step_id)
            edges = []
            for dep, outcome in rows.edges(store.using, step_id):
                state = states.get(dep, outcome or State.CANCELLED)
                if state not in SETTLED_STATES:
                    break  # a dependency came back to life: the settle will see to it
                if state != outcome:
                    rows.settle_edge(store.using, step_id, dep, state)
                edges.append((dep, state))
            else:
                done = apply(store, step_id, kind, step, edges, now)
                if done:
                    repaired += 1
                    log.event(
                        "workflow_repaired",
                        logging.WARNING,
                        outcome=done,
                        job_id=step_id,
                        kind=kind,
                        step=step.name,
                    )
    if repaired:
        wake_runners(store.using)
    return repaired
