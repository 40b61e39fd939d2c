"""What the store's tests share: a fixed instant and lease, and rows queued or written
for them.

The store contract is what every vendor store promises, run against the
database in use. The runner trusts these verbs blindly: a claim that hands one
row to two runners, or a settle that overwrites a newer claim, would run work
twice or lose it. So each promise in `jobs.store.base` has a test in this
package, and the same tests run on SQLite, PostgreSQL and MySQL/MariaDB. Time is
a parameter of every verb, so no clock is frozen: each test passes its own `now`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobs import JobSpec, enqueue
from jobs.models import LIVE_STATES, Job, State
from jobs.store import Claim, Store
from jobs.store.admission import Admission

#: A fixed instant far from the real clock, so nothing depends on when tests run.
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
KIND = "test.store"


def queue(key: str, *, kind: str = KIND, run_at: datetime = T0, **spec: Any) -> Job:
    """Enqueue one job the ordinary way and return its row."""
    assert enqueue(JobSpec(kind=kind, key=key, run_at=run_at, **spec)), f"{kind}:{key} is new"
    return live(kind, key)


def live(kind: str, key: str) -> Job:
    return Job.objects.get(kind=kind, key=key, state__in=LIVE_STATES)


def row(job: Job) -> dict[str, Any]:
    """Every column of the row as the database holds it now."""
    return dict(Job.objects.filter(id=job.id).values().get())


def settled_row(key: str, finished_at: datetime, state: str = State.DONE) -> Job:
    return Job.objects.create(
        kind=KIND,
        key=key,
        state=state,
        attempts=1,
        max_attempts=5,
        run_at=finished_at - timedelta(minutes=1),
        finished_at=finished_at,
    )


def claim_one(store: Store, now: datetime = T0, lease: timedelta = LEASE) -> Claim:
    claims = store.claim(Admission(now, {KIND: lease}, 10))
    assert len(claims) == 1, f"exactly one row was ready at {now}, claimed {claims}"
    return claims[0]
