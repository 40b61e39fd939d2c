"""What an operator does with schedules: see them, disable one, enable it again.

Disabling is stored on the schedule's row and read when each occurrence is
claimed (`occurrences.admit`), so it reaches every runner at its next claim
of that schedule, without a deploy or a restart; the occurrence is skipped to
the next fire time, so enabling again resumes at a fire time, never with a
burst of catch-up runs. The admin and `manage.py jobs schedules` share these
functions, so each change is logged the same way, naming who.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from jobs import log
from jobs.models import LIVE_ROWS, Job, Schedule
from jobs.schedules.plan import KEY_PREFIX, Planned, ScheduleError


class NoSuchSchedule(LookupError):
    """No schedule has that name (none has been reconciled by a runner yet)."""


def get(name: str, using: str | None = None) -> Listed:
    """The schedule `name`, listed; NoSuchSchedule if there is none."""
    found = listing(using, name)
    if not found:
        raise NoSuchSchedule(_missing(name))
    return found[0]


def _missing(name: str) -> str:
    return f"no schedule named {name!r} (schedules appear once a runner has started)"


def set_enabled(name: str, enabled: bool, by: str, using: str | None = None) -> Schedule:
    """Enable or disable the schedule `name`, as `by`; logged naming who."""
    with transaction.atomic(using=using):
        row = Schedule.objects.using(using).select_for_update().filter(name=name).first()
        if row is None:
            raise NoSuchSchedule(_missing(name))
        row.enabled, row.changed_by, row.changed_at = enabled, by, timezone.now()
        row.save(using=using, update_fields=["enabled", "changed_by", "changed_at", "updated_at"])
    log.event("jobs_schedule_changed", schedule=name, enabled=enabled, by=by)
    return row


@dataclass(frozen=True)
class Listed:
    """One schedule as the admin and the CLI show it."""

    row: Schedule
    expression: str
    words: str
    zone: str
    live_job: Job | None


#: The zone `describe` gives an interval (it fires on the UTC grid, in no zone)
#: and a row whose definition cannot be read.
NO_ZONE = ("—", "?")


def describe(row: Schedule) -> tuple[str, str, str]:
    """A row's timing as (expression, in words, zone)."""
    try:
        schedule = Planned.stored(row.name, row.kind, row.definition)
    except ScheduleError as error:
        return "?", str(error), NO_ZONE[1]
    timing = schedule.timing
    if timing.cron is None:
        return f"every {timing.every:g}s", timing.describe(), NO_ZONE[0]
    return timing.cron, timing.describe(), timing.zone


def local(moment: datetime, zone: str) -> datetime:
    """`moment` as its schedule reads it: in the schedule's zone (02:00 in
    Paris, not 01:00 UTC), or for an interval in the site's."""
    aware = moment if timezone.is_aware(moment) else timezone.make_aware(moment)
    return timezone.localtime(aware, None if zone in NO_ZONE else ZoneInfo(zone))


def listing(using: str | None = None, name: str | None = None) -> list[Listed]:
    """Every schedule (or the one named `name`), with its live occurrence (one
    query for all of them)."""
    found = Schedule.objects.using(using).order_by("name")
    rows = list(found if name is None else found.filter(name=name))
    keys = [KEY_PREFIX + row.name for row in rows]
    live = {
        (job.kind, job.key): job
        for job in Job.objects.using(using)
        .filter(LIVE_ROWS, key__in=keys)
        .only("id", "kind", "key", "state", "run_at", "attempts")
    }
    return [
        Listed(row, *describe(row), live.get((row.kind, KEY_PREFIX + row.name))) for row in rows
    ]
