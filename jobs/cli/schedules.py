"""`manage.py jobs schedules`: every schedule at a shell, as the admin's
Schedules page shows it, and the operator's switch to disable or enable one
(`jobs run-now --schedule NAME`, which runs one's live occurrence now, is
`jobs.cli.run_now`'s).

The listing and the switch are `jobs.schedules.operator`'s, shared with the
admin, so a change is logged the same way, naming who; this module only words
them. An unknown name is a `CommandError` (exit status 1) written before
anything is.
"""

from __future__ import annotations

import json
from argparse import SUPPRESS
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs.cli import arguments, verb
from jobs.cli.text import Write, table
from jobs.cli.verb import OK, Options, Verbs
from jobs.presentation import NOTHING, relative
from jobs.schedules import operator
from jobs.schedules.operator import Listed, NoSuchSchedule

#: schedules's help, as `--help` shows it.
HELP = (
    "List the schedules: expression, in words, zone, next and last fire, "
    "enabled, live occurrence; or disable or enable one."
)


def add_parser(verbs: Verbs) -> None:
    """`schedules` lists (`--json` for scripts); `schedules disable|enable NAME` switches one."""
    schedules = verb.add(verbs, "schedules", HELP, handle_listing)
    verb.json_argument(schedules, "the schedules")
    switches = schedules.add_subparsers(dest="switch", metavar="disable|enable")
    for name, help in (
        (
            "disable",
            "Disable a schedule: from each runner's next claim its occurrences are skipped "
            "to the next fire time. Exits 1, writing nothing, if no schedule has that name.",
        ),
        (
            "enable",
            "Enable a schedule again: it resumes at its next fire time, with no catch-up "
            "runs. Exits 1, writing nothing, if no schedule has that name.",
        ),
    ):
        switch = verb.subcommand(switches, name, help)
        switch.set_defaults(handler=handle_switch)
        switch.add_argument("name", metavar="NAME", help="The schedule's name.")
        verb.by_argument(switch)
        # Given after NAME; left unset otherwise, so as not to undo one given before it.
        switch.add_argument(
            "--database",
            type=arguments.database_alias,
            default=SUPPRESS,
            help="The database alias to work on.",
        )


def handle_listing(write: Write, options: Options) -> int:
    """`schedules`' options, to `list_schedules`."""
    return list_schedules(write, as_json=options["json"], using=options["database"])


def handle_switch(write: Write, options: Options) -> int:
    """`schedules disable|enable`'s options, to `set_enabled`."""
    return set_enabled(
        write,
        options["name"],
        enabled=options["switch"] == "enable",
        by=verb.by(options),
        using=options["database"],
    )


def list_schedules(write: Write, *, as_json: bool = False, using: str = DEFAULT_DB_ALIAS) -> int:
    """One line per schedule, by name; or JSON for scripts."""
    listed = operator.listing(using)
    if as_json:
        text = json.dumps([as_data(one) for one in listed], cls=DjangoJSONEncoder, indent=2)
        for line in text.split("\n"):  # JSON escapes newlines: each one left ends a line
            write(line)
        return OK
    if not listed:
        write("No schedules (a runner adds them at its start, from JOBS_SCHEDULES and handlers).")
        return OK
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
    return OK


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
    return OK


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
