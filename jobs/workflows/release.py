"""The rule that moves a waiting step on, applied inside the transaction of
each final settle of a step it waits for (`jobs.workflows.hook`), so the
release commits if and only if the settle does: a crash leaves both or neither.

For each dependent of the settled job, in id order (one lock order for every
settle, so two never deadlock): its job row is locked, the edge written, and
all its edges read again with a locking read (`jobs.store.workflows`). Two
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
from datetime import datetime

from jobs import log, retirement
from jobs.models import State
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
    """Apply the rule to `step_id`, one of whose dependencies settled; whether it was released."""
    locked = rows.lock_step(store.using, step_id)
    rows.settle_edge(store.using, step_id, depends_on, state)
    if locked is None:
        return False
    step_state, kind, step = locked
    if step_state != State.WAITING:
        return False  # cancelled by an operator, or released by a repair
    edges = rows.edges(store.using, step_id)
    if step.when == WHEN_DONE:
        failed = [(dep, outcome) for dep, outcome in edges if outcome not in (None, State.DONE)]
        if failed:
            dep, outcome = failed[0]
            names = rows.step_names(store.using, [dep])
            reason = f"dependency {names.get(dep, str(dep))} ended {outcome}"
            retirement.cancel(store, step_id, registry.get(kind), reason, now, by=BY)
            return False
    if any(outcome is None for _, outcome in edges):
        return False
    if not rows.release(store.using, step_id, max(now, step.due_at), now):
        return False
    log.event(
        "workflow_step_released",
        logging.DEBUG,
        outcome="released",
        job_id=step_id,
        kind=kind,
        step=step.name,
    )
    return True
