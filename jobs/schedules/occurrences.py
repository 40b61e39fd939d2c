"""The runner's side of a schedule: whether a claimed occurrence runs, and the
next occurrence queued when one ends.

An occurrence is an ordinary job whose key is "schedule:<name>"; what makes
it one is a `Schedule` row of that name and kind. `admit` reads that row once
per occurrence, after the claim and before the handler runs, so disabling a
schedule, like every config key, takes effect at the next claim. `follow`
runs inside the transaction that settles an occurrence for good (done,
failed, cancelled), so the next occurrence is queued if and only if that
settle commits: the schedule can neither stop nor fire twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from jobs import log
from jobs.models import Job, Schedule
from jobs.queue import enqueue
from jobs.schedules.plan import ONCE, SKIP, Planned, ScheduleError, name_of
from jobs.schedules.timing import Next
from jobs.spec import InvalidJobSpec
from jobs.store import Store


@dataclass(frozen=True)
class Occurrence:
    """A claimed job that is a schedule's occurrence: run it, or (with
    `skip`) move it to the schedule's next fire time unrun, for `reason`."""

    name: str
    skip: Next | None = None
    reason: str = ""


def admit(job: Job, now: datetime, using: str) -> Occurrence | None:
    """What to do with the claimed `job` if it is an occurrence: None for any
    other job (or one whose schedule is gone), which just runs."""
    name = name_of(job.key)
    if name is None:
        return None
    row = Schedule.objects.using(using).filter(name=name, kind=job.kind).first()
    if row is None:
        return None
    schedule = _stored(row)
    if schedule is None:
        return Occurrence(name)
    if not row.enabled:
        return Occurrence(name, schedule.timing.ahead(aware(now)), "the schedule is disabled")
    due = aware(row.due_at or job.run_at)
    started = aware(job.started_at or now)
    if job.attempts == 1 and schedule.missed == SKIP and schedule.timing.missed(due, started):
        reason = f"missed its fire time {due.isoformat()} (missed='skip')"
        return Occurrence(name, schedule.timing.ahead(aware(now)), reason)
    return Occurrence(name)


def skipped(store: Store, job: Job, occurrence: Occurrence, now: datetime) -> bool:
    """Move the occurrence `job` unrun to `occurrence.skip`, its attempt given
    back; fenced on the attempt like any settle (False: it lost its row)."""
    upcoming = occurrence.skip
    assert upcoming is not None
    if not store.reschedule(job, now, stored(upcoming.run_at)):
        return False
    row = Schedule.objects.using(store.using).filter(name=occurrence.name)
    row.update(
        due_at=stored(upcoming.fire_at),
        last_fire_at=stored(aware(job.run_at)),
        last_outcome="skipped",
        last_ended_at=now,
    )
    log.event(
        "schedule_occurrence_skipped",
        outcome="skipped",
        schedule=occurrence.name,
        job_id=job.id,
        reason=occurrence.reason,
        next_run_at=upcoming.run_at.isoformat(),
    )
    return True


def follow(store: Store, job: Job, now: datetime, outcome: str, started: datetime | None) -> None:
    """Queue the occurrence after `job`, which has just ended as `outcome`, in
    the caller's transaction; nothing when `job` is no schedule's occurrence.

    `started`: when the ending attempt began, or None for an occurrence that
    never ran (cancelled while queued), which counts as run on time.
    """
    name = name_of(job.key)
    if name is None:
        return
    using = store.using
    row = Schedule.objects.using(using).select_for_update().filter(name=name, kind=job.kind).first()
    if row is None:
        return  # removed: the schedule ends with this occurrence
    schedule = _stored(row)
    if schedule is None:
        return
    due = aware(row.due_at or job.run_at)
    began = due if started is None else aware(started)
    upcoming = schedule.timing.following(due, began, aware(now), schedule.missed == ONCE)
    try:
        queued = enqueue(schedule.spec(stored(upcoming.run_at)), using=using)
    except InvalidJobSpec as error:
        # A row edited by hand into a payload, queue or priority no job may
        # have: the settle must not fail for it. The schedule waits for the
        # row to be fixed (`reconcile.repair`, or the next start's reconcile).
        log.event("schedule_invalid", logging.ERROR, outcome="ignored", error=str(error))
        return
    row.due_at = stored(upcoming.fire_at)
    # An occurrence run early (run-now) stood for no fire time: its start is shown.
    row.last_fire_at, row.last_outcome = stored(min(due, began)), outcome
    row.last_job_id, row.last_ended_at = job.id, now
    row.save(
        using=using,
        update_fields=["due_at", "last_fire_at", "last_outcome", "last_job_id", "last_ended_at"],
    )
    log.event(
        "schedule_next_queued" if queued else "schedule_next_exists",
        outcome="queued" if queued else "exists",
        schedule=name,
        kind=job.kind,
        after=outcome,
        fire_at=upcoming.fire_at.isoformat(),
        run_at=upcoming.run_at.isoformat(),
    )


def _stored(row: Schedule) -> Planned | None:
    """The schedule `row` describes, or None (logged) if edited into nonsense."""
    try:
        return Planned.stored(row.name, row.kind, row.definition)
    except ScheduleError as error:
        log.event("schedule_invalid", logging.ERROR, outcome="ignored", error=str(error))
        return None


def aware(moment: datetime) -> datetime:
    """A row's datetime as an aware one: with `USE_TZ = False` rows hold naive
    wall times in `TIME_ZONE`."""
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def stored(moment: datetime) -> datetime:
    """An aware datetime as this project's rows hold it."""
    return moment if settings.USE_TZ else timezone.make_naive(moment)
