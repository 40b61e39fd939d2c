"""Start-up reconcile: the `Schedule` rows and their live occurrences brought
in line with the declared schedules (`jobs.schedules.plan`).

Runs in each runner's start-up (beside the handlers' `recover`), and for the
sweep when retention is switched back on. A new schedule gets its row and its
first occurrence, due at its next fire time; a changed one is re-planned (its
queued occurrence replaced, due at the new next fire time; a running one ends
as it is and its successor follows the new definition); a removed one has its
row deleted and its queued occurrence cancelled. Each schedule is settled under
its row's lock, so runners starting together create each occurrence once (the
live identity would refuse a second anyway).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db import transaction

from jobs import clock, log, retirement
from jobs.models import LIVE_ROWS, Job, Schedule, State
from jobs.queue import enqueue
from jobs.registry import Registry
from jobs.schedules.occurrences import aware, stored
from jobs.schedules.plan import KEY_PREFIX, ONCE, Planned, ScheduleError, planned
from jobs.schedules.timing import Next
from jobs.spec import InvalidJobSpec
from jobs.store import for_database

#: Who the log and the records name for what the reconcile does.
BY = "schedule reconcile"


def reconcile(
    registry: Registry,
    using: str | None = None,
    *,
    only: str | None = None,
    without: Collection[str] = (),
) -> None:
    """Bring every schedule (or only the one named `only`) in line with the
    declarations read from `registry` and the settings, the ones named in
    `without` left out (so removed if planned before)."""
    try:
        wanted = planned(registry)
        for name in without:
            wanted.pop(name, None)
    except ScheduleError as error:
        # `runjobs` and the system check refuse this before a runner starts.
        log.event("schedules_invalid", outcome="ignored", error=str(error))
        return
    now = clock.now(using)  # the database's time, as the runner has measured it
    for schedule in wanted.values():
        if only is None or schedule.name == only:
            keep(schedule, registry, using, now)
    rows = Schedule.objects.using(using).exclude(name__in=list(wanted))
    for name in rows.values_list("name", flat=True):
        if only is None or name == only:
            remove(name, registry, using, now)


def keep(schedule: Planned, registry: Registry, using: str | None, now: datetime) -> None:
    """Make `schedule`'s row say what it declares, with one live occurrence."""
    store = for_database(using)
    first = Schedule(name=schedule.name, kind=schedule.kind, definition=schedule.definition())
    Schedule.objects.using(store.using).bulk_create([first], ignore_conflicts=True)
    with transaction.atomic(using=store.using):
        row = Schedule.objects.using(store.using).select_for_update().get(name=schedule.name)
        live = _live(row.kind, schedule.name, store.using)
        changed = row.kind != schedule.kind or row.definition != schedule.definition()
        if changed:
            if live is not None and (live.state == State.QUEUED or row.kind != schedule.kind):
                _cancel(live, registry, "schedule changed", store.using, now)
                live = None
            row.kind, row.definition, row.due_at = schedule.kind, schedule.definition(), None
        if live is None:
            upcoming = _queue_next(row, schedule, now, store.using)
            log.event(
                "schedule_replanned" if changed else "schedule_planned",
                **_fire_fields(schedule, upcoming),
            )
        row.save(using=store.using)


def repair(using: str | None = None) -> int:
    """Queue the missing occurrence of every schedule whose row, as stored,
    can work but has none live; how many were repaired.

    An occurrence that ends while its row was edited by hand into nonsense
    queues no successor (`occurrences.follow` cannot reckon one); once the row
    is fixed, this picks the schedule up again from its stored definition,
    without waiting for a runner's start. Each row is settled under its lock,
    so runners repairing at once queue one occurrence (the live identity would
    refuse a second anyway). Schedules are few: this reads every row.
    """
    store = for_database(using)
    repaired = 0
    for name, kind in Schedule.objects.using(store.using).values_list("name", "kind"):
        if _live(kind, name, store.using) is not None:
            continue  # the usual case, read without a lock
        with transaction.atomic(using=store.using):
            row = Schedule.objects.using(store.using).select_for_update().filter(name=name).first()
            if row is None or _live(row.kind, name, store.using) is not None:
                continue
            try:
                schedule = Planned.stored(row.name, row.kind, row.definition)
                upcoming = _queue_next(row, schedule, clock.now(using), store.using)
            except (ScheduleError, InvalidJobSpec):
                continue  # still nonsense: `follow` logged it when it ended the schedule
            row.save(using=store.using, update_fields=["due_at", "updated_at"])
            log.event("schedule_repaired", **_fire_fields(schedule, upcoming))
            repaired += 1
    return repaired


def _queue_next(row: Schedule, schedule: Planned, now: datetime, using: str) -> Next:
    """Queue `schedule`'s next occurrence after `row.due_at` (resumed from
    there, missed fire times as the schedule says) and note its fire time on
    `row`, which the caller saves."""
    due = None if row.due_at is None else aware(row.due_at)
    upcoming = schedule.timing.resume(due, aware(now), schedule.missed == ONCE)
    enqueue(schedule.spec(stored(upcoming.run_at)), using=using)
    row.due_at = stored(upcoming.fire_at)
    return upcoming


def _fire_fields(schedule: Planned, upcoming: Next) -> dict[str, Any]:
    return {
        "schedule": schedule.name,
        "kind": schedule.kind,
        "fire_at": upcoming.fire_at.isoformat(),
        "run_at": upcoming.run_at.isoformat(),
    }


def remove(name: str, registry: Registry, using: str | None, now: datetime) -> None:
    """Forget the schedule `name`: its row deleted, its queued occurrence cancelled
    ("schedule removed"); a running one finishes and queues no successor."""
    store = for_database(using)
    with transaction.atomic(using=store.using):
        row = Schedule.objects.using(store.using).select_for_update().filter(name=name).first()
        if row is None:
            return
        row.delete(using=store.using)  # first: a successor reads the row, and finds none
        live = _live(row.kind, name, store.using)
        if live is not None and live.state == State.QUEUED:
            _cancel(live, registry, "schedule removed", store.using, now)
    log.event("schedule_removed", schedule=name, kind=row.kind)


def forget(name: str, using: str | None = None) -> None:
    """Delete the schedule `name`'s row only, so the occurrence running now is
    its last (the sweep's, when retention is switched off)."""
    Schedule.objects.using(using).filter(name=name).delete()


def _live(kind: str, name: str, using: str) -> Job | None:
    jobs = Job.objects.using(using).filter(LIVE_ROWS, kind=kind, key=KEY_PREFIX + name)
    return jobs.only("id", "kind", "key", "state").first()


def _cancel(job: Job, registry: Registry, reason: str, using: str, now: datetime) -> None:
    retirement.cancel(
        for_database(using), job.id, registry.get(job.kind), reason, now, by=BY, hooks=False
    )
