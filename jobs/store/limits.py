"""Claims under limits: a kind's `concurrency_limit`, across every runner and
process, and a runner's own cap per queue (`runjobs --queue NAME=N`).

Race-free on every database. Every claim that may take a limited kind first
holds the kind's gate for its transaction (`Store.gated`), then counts the
kind's running attempts, then claims, then writes a `LimitedAttempt` row per
attempt it started, and lets the gate go only as its transaction ends. So the
count a claim reads includes every claim of the kind committed before it,
and no other claim of the kind commits until it has. A kind whose gate
another claim holds at that instant is left for the next pass: a claim never
waits on one.

The count reads the kind's `LimitedAttempt` rows (at most its limit, never
its backlog), deleting those whose attempts have ended (settled, reclaimed,
or past their lease): settles never touch that table.

Within those rooms the claim keeps claim order: it claims at most the
smallest room left at a time (so no single statement can pass any room),
drops each kind or queue whose room is spent, and claims again until its
slots are full or nothing more is ready. A kind at its limit is passed over
and lower priorities of other kinds are claimed, as the rule asks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import Exists, OuterRef

from jobs.models import Job, LimitedAttempt, State
from jobs.store.base import Store
from jobs.store.rows import Claim, in_claim_order

if TYPE_CHECKING:
    from jobs.handlers import JobHandler


def running(store: Store, kinds: Sequence[str], now: datetime) -> dict[str, int]:
    """How many attempts of each of `kinds` are running, as their
    `LimitedAttempt` rows say; those whose attempts have ended are deleted.
    Call inside the gates' transaction."""
    rows = (
        LimitedAttempt.objects.using(store.using)
        .filter(kind__in=kinds)
        .annotate(
            still=Exists(
                Job.objects.filter(
                    id=OuterRef("job_id"), state=State.RUNNING, attempts=OuterRef("attempts")
                )
            )
        )
        .values_list("job_id", "kind", "lease_expires_at", "still")
    )
    counts = dict.fromkeys(kinds, 0)
    ended = []
    for job_id, kind, lease_expires_at, still in rows:
        if still and lease_expires_at > now:
            counts[kind] += 1
        else:
            ended.append(job_id)
    if ended:
        LimitedAttempt.objects.using(store.using).filter(job_id__in=ended).delete()
    return counts


def of(handlers: Iterable[JobHandler], leases: Mapping[str, timedelta]) -> dict[str, int]:
    """The concurrency limit of each kind in `leases` whose handler sets one."""
    return {
        handler.kind: handler.concurrency_limit
        for handler in handlers
        if handler.concurrency_limit is not None and handler.kind in leases
    }


def hold(store: Store, claims: Sequence[Claim], kinds: set[str], now: datetime) -> None:
    """Write a `LimitedAttempt` for each claim of `kinds`, in the claim's transaction."""
    held = [claim.job for claim in claims if claim.job.kind in kinds]
    if not held:
        return
    attempts = LimitedAttempt.objects.using(store.using)
    # A row left for a job by an attempt that ended unseen gives way.
    attempts.filter(job_id__in=[job.id for job in held]).delete()
    attempts.bulk_create(
        LimitedAttempt(
            job_id=job.id,
            kind=job.kind,
            attempts=job.attempts,
            # Always set by the claim; were it not, the attempt would count for nothing.
            lease_expires_at=job.lease_expires_at or now,
        )
        for job in held
    )


def settle_and_claim(
    store: Store,
    done: Sequence[tuple[Job, Any]],
    now: datetime,
    leases: Mapping[str, timedelta],
    free: int,
    runner: str,
    queues: Sequence[str] | None,
    kind_limits: Mapping[str, int],
    queue_rooms: Mapping[str, int],
    paused_queues: Sequence[str] = (),
) -> tuple[set[uuid.UUID], list[Claim]]:
    """`Store.settle_and_claim` within `kind_limits` (each limited kind's
    cluster-wide limit) and `queue_rooms` (the slots this runner may still
    give each capped queue of `queues`), in one transaction; the store's own
    when there is neither."""
    limited = sorted(kind for kind in kind_limits if kind in leases)
    if not limited and not queue_rooms:
        return store.settle_and_claim(done, now, leases, free, runner, queues, paused_queues)
    with store.gated(limited) as gated:
        counts = running(store, sorted(gated), now) if gated else {}
        rooms: dict[str, int] = {
            kind: max(0, kind_limits[kind] - counts.get(kind, 0)) for kind in gated
        }
        kinds = {
            kind: lease
            for kind, lease in leases.items()
            if kind not in kind_limits or rooms.get(kind, 0) > 0
        }
        queue_room = dict(queue_rooms)
        served = None if queues is None else [q for q in queues if queue_room.get(q, 1) > 0]
        won: set[uuid.UUID] = set()
        claims: list[Claim] = []
        settled = not done
        while kinds and (served is None or served):
            step = min(
                [
                    free - len(claims),
                    *(rooms[kind] for kind in kinds if kind in rooms),
                    *(queue_room[queue] for queue in served or () if queue in queue_room),
                ]
            )
            if step <= 0:
                break
            if settled:
                taken = store.claim(now, kinds, step, runner, served, paused_queues)
            else:
                won, taken = store.settle_and_claim(
                    done, now, kinds, step, runner, served, paused_queues
                )
                settled = True
            claims += taken
            for claim in taken:
                if claim.job.kind in rooms:
                    rooms[claim.job.kind] -= 1
                if claim.job.queue in queue_room:
                    queue_room[claim.job.queue] -= 1
            kinds = {kind: lease for kind, lease in kinds.items() if rooms.get(kind, 1) > 0}
            if served is not None:
                served = [queue for queue in served if queue_room.get(queue, 1) > 0]
            if len(taken) < step:
                break  # nothing more is ready for this claim
        if not settled:
            won = store.complete_many(done, now)
        hold(store, claims, gated, now)
    return won, in_claim_order(claims)
