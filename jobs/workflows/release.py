"""The rule that moves a waiting step on, applied inside the transaction of
each final settle of a step it waits for (`jobs.workflows.hook`), so the
release commits if and only if the settle does: a crash leaves both or neither.

The dependents of the settled jobs (one, or a pass's `Done`s together) have
their job rows locked in id order (one lock order for every settle, so two
never deadlock), then the edges are written, then whether any edge of each is
still unsettled is read in a way that sees the latest commits and stops at
the first it finds (`jobs.store.workflows.with_unsettled_edges`; PostgreSQL's
all three in one message, `jobs.store.postgresql.workflows`). Two runners
settling its last two dependencies at once are serialised on that lock, and
the second sees the first's edge: it is released exactly once, never early.
The design note docs/design/workflows.md argues it per database.

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
    settled_many(store, [(job_id, state)], now)


def settled_many(store: Store, jobs: Sequence[tuple[uuid.UUID, str]], now: datetime) -> None:
    """The steps `jobs` (id, state) settled for good, together (a pass's
    `Done`s, or one retirement): apply the rule to every step waiting for any
    of them, inside the caller's transaction, in a few statements for the
    lot whatever their number. The waiting steps' rows are locked first, in
    id order, then the edges written, then read."""
    using = store.using
    answered = rows.settle_dependents(using, jobs, now)
    if answered is not None:
        _answered(store, *answered, now)
        return
    pairs = rows.dependents_of(using, [job_id for job_id, _ in jobs])
    if not pairs:
        return
    locked = rows.lock_steps(using, sorted({step_id for step_id, _ in pairs}))
    outcomes: dict[uuid.UUID, str] = dict(jobs)
    by_state: dict[str, list[uuid.UUID]] = {}
    for job_id, state in jobs:
        by_state.setdefault(state, []).append(job_id)
    for state, ids in by_state.items():
        rows.settle_edges(using, ids, state)
    # Not waiting: gone, cancelled by an operator, or released by a repair.
    waiting = [step_id for step_id in locked if locked[step_id][0] == State.WAITING]
    # A "done" step one of these ended other than done for is cancelled now.
    doomed = {
        step_id
        for step_id, depends_on in pairs
        if outcomes[depends_on] != State.DONE and step_id in waiting
        if locked[step_id][2].when == WHEN_DONE
    }
    waiting = [step_id for step_id in waiting if step_id not in doomed]
    ready = set(waiting) - rows.with_unsettled_edges(using, waiting) if waiting else set()
    # Every edge of `ready` has settled: a "done" one with an edge failed
    # earlier (rows edited by hand) goes the long way too.
    done_rule = [step_id for step_id in ready if locked[step_id][2].when == WHEN_DONE]
    doomed |= rows.with_failed_edges(using, done_rule) if done_rule else set()
    for step_id in sorted(doomed):
        _, kind, step = locked[step_id]
        apply(store, step_id, kind, step, rows.edges(using, step_id), now)
    due: dict[datetime, list[uuid.UUID]] = {}
    for step_id in sorted(ready - doomed):
        due.setdefault(max(now, locked[step_id][2].due_at), []).append(step_id)
    if not due:
        return
    for run_at, ids in due.items():
        rows.release_many(using, ids, run_at, now)
    if log.enabled(logging.DEBUG):
        for ids in due.values():
            for step_id in ids:
                _, kind, step = locked[step_id]
                _released(step_id, kind, step.name)
    wake_runners(using)


def _answered(
    store: Store,
    released: Sequence[tuple[uuid.UUID, str]],
    doomed: Sequence[uuid.UUID],
    now: datetime,
) -> None:
    """The rest of the rule where the store applied it (`rows.settle_dependents`):
    cancel the steps it found doomed, log the releases, wake the runners."""
    for step_id in doomed:
        locked = rows.lock_step(store.using, step_id)
        if locked is not None and locked[0] == State.WAITING:
            _, kind, step = locked
            apply(store, step_id, kind, step, rows.edges(store.using, step_id), now)
    if not released:
        return
    if log.enabled(logging.DEBUG):
        names = rows.step_names(store.using, [step_id for step_id, _ in released])
        for step_id, kind in released:
            _released(step_id, kind, names.get(step_id, ""))
    wake_runners(store.using, notified=True)  # by the store's statement


def _released(step_id: uuid.UUID, kind: str, name: str) -> None:
    log.event(
        "workflow_step_released",
        logging.DEBUG,
        outcome="released",
        job_id=step_id,
        kind=kind,
        step=name,
    )


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
