"""The operator's verbs for a batch of rows at once: requeue, run now.

`jobs.bulk` walks every job a filter matches a batch at a time and hands each
batch here, inside the batch's own transaction. Each verb locks the batch's
rows that are still in a state it acts on (`SELECT ... FOR UPDATE`; SQLite's
write transaction serialises instead), writes them with one UPDATE, and
answers which it wrote, so the caller can say why it left the others. The
same promises as the one-row verbs (`Store.requeue`, `Store.run_now`), which
stay the path for jobs given by id; ORM only, the same on every database.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction

from jobs import history
from jobs.models import LIVE_STATES, Job, State
from jobs.store.base import Store

#: The states a requeue takes a row from.
RETIRED = (State.FAILED, State.CANCELLED)


@dataclass
class Requeued:
    """What `requeue` did with a batch: the rows it queued again and the rows it
    left because a live job holds their `(kind, key)`, each as (id, kind, key)."""

    requeued: list[tuple[uuid.UUID, str, str]] = field(default_factory=list)
    held: list[tuple[uuid.UUID, str, str]] = field(default_factory=list)


def requeue(
    store: Store, ids: Sequence[uuid.UUID], now: datetime, max_attempts: int | None = None
) -> Requeued:
    """Queue the failed or cancelled rows among `ids` again at `now`, with a fresh
    attempt budget (`max_attempts` of them when given, else each row's own), as
    `Store.requeue` does one. A row whose identity a live job holds, or an
    earlier row of the batch takes, is left as it is and answered in `held`.

    Call inside the batch's transaction. The identities are looked up by the
    live-identity index first, so one UPDATE writes the batch; a live row
    inserted between that look and the write makes the UPDATE fail, and then
    each row is requeued alone, in a savepoint of its own.
    """
    jobs = Job.objects.using(store.using)
    rows = list(
        jobs.select_for_update()
        .filter(id__in=ids, state__in=RETIRED)
        .order_by("id")
        .values_list("id", "kind", "key")
    )
    done = Requeued()
    if not rows:
        return done
    # By `state`, not `live`: the planner cannot prove a state filter of the
    # ready index's condition, so it probes the identity index, one descent a
    # key. Filtered on `live`, with statistics from before a bulk retry made
    # thousands of rows live, it read the ready index whole (375 ms against
    # 7 ms at 50,000 live rows).
    live = set(
        jobs.filter(
            state__in=LIVE_STATES,
            kind__in={kind for _, kind, _ in rows},
            key__in={key for *_, key in rows},
        )
        .values_list("kind", "key")
        .order_by()
    )
    chosen = []
    for row in rows:
        _, kind, key = row
        if (kind, key) in live:
            done.held.append(row)
        else:
            live.add((kind, key))
            chosen.append(row)
    columns = _requeued_columns(now, max_attempts)
    try:
        with transaction.atomic(using=store.using):
            jobs.filter(id__in=[job_id for job_id, *_ in chosen], state__in=RETIRED).update(
                **columns
            )
        done.requeued = chosen
    except IntegrityError:
        for row in chosen:
            try:
                with transaction.atomic(using=store.using):
                    written = jobs.filter(id=row[0], state__in=RETIRED).update(**columns)
            except IntegrityError:
                done.held.append(row)
            else:
                if written:
                    done.requeued.append(row)
    return done


def _requeued_columns(now: datetime, max_attempts: int | None) -> dict[str, object]:
    columns: dict[str, object] = {
        "state": State.QUEUED,
        "attempts": 0,
        "run_at": now,
        "lease_expires_at": None,
        "finished_at": None,
        "updated_at": now,
        "abandon_owed_at": None,
    }
    if max_attempts is not None:
        columns["max_attempts"] = max_attempts
    return columns


def run_now(store: Store, ids: Sequence[uuid.UUID], now: datetime) -> set[uuid.UUID]:
    """Bring the `run_at` of the queued rows among `ids` forward to `now`, as
    `Store.run_now` does one; the ids it wrote. Call inside the batch's transaction."""
    jobs = Job.objects.using(store.using)
    queued = set(
        jobs.select_for_update().filter(id__in=ids, state=State.QUEUED).values_list("id", flat=True)
    )
    if queued:
        jobs.filter(id__in=queued, state=State.QUEUED).update(run_at=now, updated_at=now)
    return queued


#: Rows per UPDATE when the batch's attempt records are written back: each row
#: carries its whole record (up to ~180 KB), so a statement stays a few MB.
NOTE_CHUNK = 100


def note_action(store: Store, ids: Sequence[uuid.UUID], entry: history.Entry) -> None:
    """Append `entry` (an operator's action, the same for every row) to the
    attempt record of each of `ids`, as `Store.note_action` does one: the
    records read in one statement, written back a `NOTE_CHUNK` at a time.
    Call inside the batch's transaction, after the write it notes, which
    locked the rows."""
    if not ids:
        return
    jobs = Job.objects.using(store.using)
    rows = list(jobs.filter(id__in=ids).only("id", "errors"))
    for job in rows:
        job.errors = history.appended(job.errors, entry)
    jobs.bulk_update(rows, ["errors"], batch_size=NOTE_CHUNK)
