"""`manage.py jobs schedules`: every schedule at a shell, as the admin's
Schedules page shows it, and the operator's switch to disable or enable one;
`jobs run-now --schedule NAME` runs one's live occurrence now.

The listing and the switch are `jobs.schedules.operator`'s, shared with the
admin, so a change is logged the same way, naming who; this module only words
them. An unknown name is a `CommandError` (exit status 1) written before
anything is.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs import cli, operations
from jobs.cli.text import Write, table
from jobs.presentation import NOTHING, relative
from jobs.schedules import operator
from jobs.schedules.operator import Listed, NoSuchSchedule


def list_schedules(write: Write, *, as_json: bool = False, using: str = DEFAULT_DB_ALIAS) -> int:
    """One line per schedule, by name; or JSON for scripts."""
    listed = operator.listing(using)
    if as_json:
        text = json.dumps([as_data(one) for one in listed], cls=DjangoJSONEncoder, indent=2)
        for line in text.split("\n"):  # JSON escapes newlines: each one left ends a line
            write(line)
        return cli.OK
    if not listed:
        write("No schedules (a runner adds them at its start, from JOBS_SCHEDULES and handlers).")
        return cli.OK
    now = timezone.now()
    rows = [["NAME", "EXPRESSION", "IN WORDS", "ZONE", "NEXT FIRE", "LAST FIRE", "ENABLED", "LIVE"]]
    rows += [
        [
            one.row.name,
            one.expression,
            one.words,
            one.zone,
            _when(one.row.due_at, now, one.zone),
            _last(one, now),
            "yes" if one.row.enabled else f"no (by {one.row.changed_by or NOTHING})",
            f"{one.live_job.id} {one.live_job.state}" if one.live_job else NOTHING,
        ]
        for one in listed
    ]
    for line in table(rows):
        write(line)
    return cli.OK


def set_enabled(
    write: Write, name: str, *, enabled: bool, by: str, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Enable or disable the schedule `name`; says so, and what it means."""
    try:
        row = operator.set_enabled(name, enabled, by=by, using=using)
    except NoSuchSchedule as error:
        raise CommandError(str(error)) from None
    if enabled:
        write(f"enabled schedule {row.name} (by {by}): it resumes at its next fire time")
    else:
        write(
            f"disabled schedule {row.name} (by {by}): from each runner's next claim its "
            "occurrences are skipped to the next fire time, until enabled again"
        )
    return cli.OK


def run_now(write: Write, name: str, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """Make the schedule `name`'s queued occurrence due now (`jobs.operations.run_now`);
    the next is due at the fire time this one stood for."""
    try:
        live = operator.get(name, using).live_job
    except NoSuchSchedule as error:
        raise CommandError(str(error)) from None
    if live is None:
        write(f"schedule {name} has no live occurrence (a runner's start queues one)")
        return cli.NOT_ALL_DONE
    write(f"schedule {name}: occurrence {live.id}")
    report = operations.run_now([live.id], using=using)
    write(str(report))
    return cli.NOT_ALL_DONE if report.skipped else cli.OK


def as_data(listed: Listed) -> dict[str, Any]:
    """One schedule for `--json`: its row's fields, its timing, and its live job."""
    row, live = listed.row, listed.live_job
    return {
        "name": row.name,
        "kind": row.kind,
        "expression": listed.expression,
        "words": listed.words,
        "zone": listed.zone,
        "enabled": row.enabled,
        "changed_by": row.changed_by,
        "changed_at": row.changed_at,
        "next_fire": row.due_at,
        "last_fire": row.last_fire_at,
        "last_outcome": row.last_outcome,
        "last_job_id": row.last_job_id,
        "last_ended_at": row.last_ended_at,
        "live_job": None if live is None else {"id": live.id, "state": live.state},
    }


def _when(moment: datetime | None, now: datetime, zone: str) -> str:
    """An instant to the second in its schedule's zone, and how far from now."""
    if moment is None:
        return NOTHING
    return f"{operator.local(moment, zone):%Y-%m-%d %H:%M:%S %Z} ({relative(moment, now)})"


def _last(one: Listed, now: datetime) -> str:
    if one.row.last_fire_at is None:
        return NOTHING
    return f"{_when(one.row.last_fire_at, now, one.zone)} {one.row.last_outcome}"
