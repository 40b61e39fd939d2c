"""`manage.py jobs dead`: the dead letters, retired jobs grouped by kind and the line
of their error that tells what went wrong (`jobs.dead_letters`), most jobs first."""

from __future__ import annotations

import json
from datetime import datetime

from django.utils import timezone

from jobs import dead_letters
from jobs.cli import arguments, verb
from jobs.cli.text import Write, table, terminal_safe
from jobs.cli.verb import OK, Options, Verbs
from jobs.presentation import NOTHING

#: dead's help, as `--help` shows it.
HELP = (
    "List the dead letters: failed and cancelled jobs grouped by kind and by the telling "
    "line of their error, with counts and first and last seen. Retry a group with redrive."
)

#: How many groups are shown unless told otherwise.
DEFAULT_LIMIT = 50


def add_parser(verbs: Verbs) -> None:
    dead = verb.add(verbs, "dead", HELP, handle)
    dead.add_argument(
        "--kind",
        action="append",
        default=[],
        type=arguments.kind,
        help="Only groups of this kind (repeatable).",
    )
    low, high = arguments.LIMIT_RANGE
    dead.add_argument(
        "--limit",
        type=arguments.limit,
        default=DEFAULT_LIMIT,
        help=f"Show at most this many groups, {low} to {high:,} (default {DEFAULT_LIMIT}).",
    )
    verb.json_argument(
        dead, "every group", "kind, error, count, failed, cancelled, first and last seen"
    )


def handle(write: Write, options: Options) -> int:
    """`dead`'s options, to `dead_letters`."""
    return show_dead_letters(
        write,
        kinds=tuple(options["kind"]),
        limit=options["limit"],
        as_json=options["json"],
        using=options["database"],
    )


def show_dead_letters(
    write: Write,
    *,
    kinds: tuple[str, ...] = (),
    limit: int = DEFAULT_LIMIT,
    as_json: bool = False,
    using: str = "default",
) -> int:
    """The groups (`jobs.dead_letters.groups`), a line each, or as JSON."""
    found = dead_letters.groups(kinds=kinds, using=using)
    if as_json:
        write(json.dumps([_as_json(group) for group in found[:limit]], ensure_ascii=True))
        return OK
    if not found:
        write("No dead letters: no failed or cancelled jobs" + (" of that kind." if kinds else "."))
        return OK
    rows = [["KIND", "JOBS", "FAILED", "CANCELLED", "FIRST SEEN", "LAST SEEN", "ERROR"]]
    rows += [
        [
            group.kind,
            f"{group.count:,}",
            f"{group.failed:,}",
            f"{group.cancelled:,}",
            _stamp(group.first_seen),
            _stamp(group.last_seen),
            terminal_safe(group.line) or NOTHING,
        ]
        for group in found[:limit]
    ]
    for line in table(rows):
        write(line)
    if len(found) > limit:
        write(f"({limit} of {len(found):,} groups shown: raise --limit or give --kind)")
    write("Retry a group: jobs redrive --kind KIND --error 'ERROR' [--attempts N]")
    return OK


def _stamp(moment: datetime | None) -> str:
    if moment is None:
        return NOTHING
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z}"


def _as_json(group: dead_letters.Group) -> dict[str, object]:
    return {
        "kind": group.kind,
        "error": group.line,
        "count": group.count,
        "failed": group.failed,
        "cancelled": group.cancelled,
        "first_seen": group.first_seen.isoformat() if group.first_seen else None,
        "last_seen": group.last_seen.isoformat() if group.last_seen else None,
    }
