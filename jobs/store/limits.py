"""Claims under limits: a kind's `concurrency_limit`, across every runner and
process, and a runner's own cap per queue (`runjobs --queue NAME=N`), as an
`Admission` gives them (`kind_limits`, `queue_rooms`): this module executes
it; what a runner may take is `jobs.runner.admission`'s to say.

Race-free on every database. Every claim that may take a limited kind first
holds the kind's gate for its transaction (`Store.gated`), then counts the
kind's running attempts, then claims, then writes a `LimitedAttempt` row per
attempt it started, and lets the gate go only as its transaction ends. So the
count a claim reads includes every claim of the kind committed before it,
and no other claim of the kind commits until it has. A kind whose gate
another claim holds at that instant is left for the next pass: a claim never
waits on one.

The count reads the kind's `LimitedAttempt` rows (at most its limit, never
its backlog); those whose attempts have ended (settled, reclaimed, or past
their lease) are deleted with the pass's own writes: settles never touch
that table. Beside the claim, a pass that may take a limited kind costs four
statements (the gate, the count, the delete, the insert).

Within those rooms the claim keeps claim order. Where the store keeps to
kinds' caps in its own claim (`Store.applies_kind_caps`: PostgreSQL in the
statement, MySQL in its choice of rows to lock), one claim takes every free
slot, at most each kind's room of it; elsewhere (SQLite, and for a queue's
room) a claim takes at most the smallest room left. Either way each kind or
queue whose room is spent is dropped and the claim repeated until the slots
are full or nothing more is ready. A kind at its limit is passed over and
lower priorities of other kinds are claimed, as the rule asks.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobs.models import Job
from jobs.store.admission import Admission
from jobs.store.base import Store
from jobs.store.rows import Claim, in_claim_order, placeholders

#: Each `LimitedAttempt` of the given kinds, and whether its attempt still
#: runs (its job is `running` on that attempt, under a lease not yet ended).
#: Written once, in SQL every database reads alike: through the ORM its
#: compilation cost more than the statement, on every pass.
RUNNING_SQL = """
    SELECT s.job_id, s.kind,
           CASE WHEN j.id IS NOT NULL AND s.lease_expires_at > %s THEN 1 ELSE 0 END
    FROM jobs_limitedattempt s
    LEFT JOIN jobs_job j ON j.id = s.job_id AND j.state = 'running' AND j.attempts = s.attempts
    WHERE s.kind IN ({kinds})
"""


def running(store: Store, kinds: Sequence[str], now: datetime) -> tuple[dict[str, int], list[Any]]:
    """How many attempts of each of `kinds` are running, as their
    `LimitedAttempt` rows say, and the rows whose attempts have ended (for
    `hold` to delete). Call inside the gates' transaction."""
    counts = dict.fromkeys(kinds, 0)
    ended: list[Any] = []
    with store.runner_cursor() as cursor:
        cursor.execute(
            RUNNING_SQL.format(kinds=placeholders(len(kinds))),
            [store.prepare("lease_expires_at", now), *kinds],
        )
        for job_id, kind, still in cursor.fetchall():
            if still:
                counts[kind] += 1
            else:
                ended.append(job_id)
    return counts, ended


#: Delete the given `LimitedAttempt` rows; insert one.
DELETE_SQL = "DELETE FROM jobs_limitedattempt WHERE job_id IN ({ids})"
INSERT_SQL = (
    "INSERT INTO jobs_limitedattempt (job_id, kind, attempts, lease_expires_at) VALUES {rows}"
)


def hold(
    store: Store, claims: Sequence[Claim], kinds: set[str], now: datetime, ended: Sequence[Any]
) -> None:
    """Delete the `ended` rows, and write a `LimitedAttempt` for each claim of
    `kinds`: at most two statements, in the claim's transaction. A row left
    for a claimed job by an attempt that ended unseen gives way too."""
    held = [
        (store.prepare("id", claim.job.id), claim.job)
        for claim in claims
        if claim.job.kind in kinds
    ]
    gone = [*ended, *(job_id for job_id, _ in held)]
    if not gone:
        return
    with store.runner_cursor() as cursor:
        cursor.execute(DELETE_SQL.format(ids=placeholders(len(gone))), gone)
        if not held:
            return
        values: list[Any] = []
        for job_id, job in held:
            values += [
                job_id,
                job.kind,
                job.attempts,
                # Always set by the claim; were it not, the attempt would count for nothing.
                store.prepare("lease_expires_at", job.lease_expires_at or now),
            ]
        cursor.execute(INSERT_SQL.format(rows=", ".join(["(%s, %s, %s, %s)"] * len(held))), values)


def settle_and_claim(
    store: Store, done: Sequence[tuple[Job, Any]], admission: Admission, *fields: Any
) -> tuple[set[uuid.UUID], list[Claim]]:
    """`Store.settle_and_claim` within the admission's `kind_limits` (each
    limited kind's cluster-wide limit) and `queue_rooms` (the slots this
    runner may still give each capped queue of its `queues`), in one
    transaction; the store's own when there is neither.

    Also takes the call it took before there was an admission: `now,
    leases, free, runner, queues, kind_limits, queue_rooms[, paused_queues]`
    in `admission`'s place."""
    if type(admission) is not Admission:
        admission = _admission_of(admission, *fields)
    now, leases, kind_limits = admission.now, admission.leases, admission.kind_limits
    limited = sorted(kind for kind in kind_limits if kind in leases)
    if not limited and not admission.queue_rooms:
        return store.settle_and_claim(done, admission)
    with store.gated(limited) as gated:
        counts, ended = running(store, sorted(gated), now) if gated else ({}, [])
        rooms: dict[str, int] = {
            kind: max(0, kind_limits[kind] - counts.get(kind, 0)) for kind in gated
        }
        kinds = {
            kind: lease
            for kind, lease in leases.items()
            if kind not in kind_limits or rooms.get(kind, 0) > 0
        }
        queue_room = dict(admission.queue_rooms)
        queues = admission.queues
        served = None if queues is None else [q for q in queues if queue_room.get(q, 1) > 0]
        won: set[uuid.UUID] = set()
        claims: list[Claim] = []
        settled = not done
        while kinds and (served is None or served):
            # A store that keeps to kinds' caps in its claim is given them and
            # all the free slots; otherwise no statement may take more than
            # the smallest room left. Queues' rooms are always taken that way.
            caps = {kind: rooms[kind] for kind in kinds if kind in rooms}
            step = min(
                [
                    admission.limit - len(claims),
                    *(() if store.applies_kind_caps else caps.values()),
                    *(queue_room[queue] for queue in served or () if queue in queue_room),
                ]
            )
            if step <= 0:
                break
            one = admission.narrowed(kinds, step, served, caps if store.applies_kind_caps else None)
            if settled:
                taken = store.claim(one)
            else:
                won, taken = store.settle_and_claim(done, one)
                settled = True
            claims += taken
            for claim in taken:
                if claim.job.kind in rooms:
                    rooms[claim.job.kind] -= 1
                if claim.job.queue in queue_room:
                    queue_room[claim.job.queue] -= 1
            spent = [kind for kind in kinds if rooms.get(kind, 1) <= 0]
            kinds = {kind: lease for kind, lease in kinds.items() if kind not in spent}
            if served is not None:
                served = [queue for queue in served if queue_room.get(queue, 1) > 0]
            if len(taken) < step and not (spent and store.applies_kind_caps):
                # Nothing more is ready for this claim (a capped claim may have
                # passed over rows of a kind it just filled: it claims again
                # without that kind).
                break
        if not settled:
            won = store.complete_many(done, now)
        hold(store, claims, gated, now, ended)
    return won, in_claim_order(claims)


def _admission_of(
    now: Any,
    leases: Mapping[str, timedelta],
    free: int,
    runner: str,
    queues: Sequence[str] | None,
    kind_limits: Mapping[str, int],
    queue_rooms: Mapping[str, int],
    paused_queues: Sequence[str] = (),
) -> Admission:
    """The admission `settle_and_claim`'s call before there was one described."""
    return Admission(
        now, leases, free, runner, queues, paused_queues, None, kind_limits, queue_rooms
    )
