"""`retry`, `cancel` and `run-now` by filter instead of by id, and the steps every
bulk action at the shell takes: count, say the number, confirm, act in batches,
report (`jobs.bulk`).

A filter is given by options (`--kind`, `--state`, `--queue`, `--since`,
`--error-contains`); ids and a filter exclude each other, so a mistyped id
never widens into a filter. The count is printed first. `--dry-run` stops
there; otherwise the action needs `--yes`, or a "y" typed at the prompt when
stdin is a terminal: a script without `--yes` is refused, writing nothing.
More jobs than `--max` (default `jobs.bulk.CAP`) are refused as a filter
most likely too broad. A kind or queue nothing names is warned about, as
every verb does (`jobs.cli.names`), and refused with `--strict`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from jobs import bulk
from jobs.cli import arguments, names
from jobs.cli.text import Write
from jobs.cli.verb import NOT_ALL_DONE, OK, Options
from jobs.models import JobsConfig, State
from jobs.presentation import cancelling_running

#: Asks the operator a yes/no question; True for yes.
Ask = Callable[[str], bool]

#: `--max`: from one job to ten times the default cap.
MAX_RANGE = (1, 10 * bulk.CAP)

#: The filter's options, as their `dest`s.
FILTER_OPTIONS = ("kind", "state", "queue", "since", "error_contains")
#: The options that only go with a filter.
FILTER_ONLY = {"dry_run": "--dry-run", "yes": "--yes", "max": "--max", "strict": "--strict"}


def since(text: str) -> Any:
    """`--since`: a look-back such as 30m or 2h (`jobs.bulk.parse_since`)."""
    try:
        return bulk.parse_since(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def error_text(text: str) -> str:
    """`--error-contains`: 1 to 1,000 characters."""
    if not 0 < len(text) <= 1_000:
        raise argparse.ArgumentTypeError("must be 1 to 1,000 characters")
    return text


def add_filter_arguments(parser: argparse.ArgumentParser, action: bulk.Action) -> None:
    """The filter's options, and those of the bulk steps, for `action`'s verb."""
    group = parser.add_argument_group(
        "acting on every job a filter matches (instead of IDs)",
        f"Counts the matching jobs first and prints the number; acts on them "
        f"{bulk.BATCH:,} at a time, each batch its own transaction.",
    )
    group.add_argument(
        "--kind",
        action="append",
        default=[],
        type=arguments.kind,
        help="Jobs of this kind (repeatable).",
    )
    group.add_argument(
        "--state",
        action="append",
        default=[],
        choices=[str(state) for state in action.states],
        help=f"Jobs in this state (repeatable; default: {' and '.join(action.states)}).",
    )
    group.add_argument(
        "--queue",
        action="append",
        default=[],
        type=arguments.queue_name,
        help="Jobs of this queue (repeatable).",
    )
    group.add_argument(
        "--since",
        type=since,
        metavar="AGE",
        help="Jobs whose state last changed (queued, claimed, retried, settled) within this "
        "long: 90s, 30m, 2h, 1d, 1w.",
    )
    group.add_argument(
        "--error-contains",
        type=error_text,
        metavar="TEXT",
        help="Jobs whose last error holds this text, in any case.",
    )
    confirm_arguments(group)


def confirm_arguments(group: Any) -> None:
    """`--dry-run`, `--yes`, `--max` and `--strict`: what every bulk verb takes."""
    group.add_argument(
        "--dry-run", action="store_true", help="Count and print the matching jobs; change nothing."
    )
    group.add_argument(
        "--yes",
        action="store_true",
        help="Act without asking (otherwise asked at a terminal, refused in a script).",
    )
    group.add_argument(
        "--max",
        type=arguments.whole_number(MAX_RANGE),
        metavar="N",
        help=f"Refuse if more than N jobs match (default {bulk.CAP:,}).",
    )
    names.strict_argument(group)


def wants_filter(options: Options, ids: list[Any], *, besides: str = "") -> bool:
    """Whether the verb acts by filter; `CommandError` (exit 2) for ids and a filter
    together, for neither, and for a filter-only option given with ids. `besides`
    names the verb's other way to say which jobs (run-now's `--schedule`)."""
    given = [name for name in FILTER_OPTIONS if options.get(name)]
    if ids and given:
        raise CommandError(
            "give job IDs or a filter (--kind, --state, ...), not both", returncode=2
        )
    if ids:
        extra = [flag for name, flag in FILTER_ONLY.items() if options.get(name)]
        if extra:
            raise CommandError(f"{', '.join(extra)} go with a filter, not with IDs", returncode=2)
        return False
    if not given:
        raise CommandError(
            f"give job IDs{besides}, or a filter: --kind, --state, --queue, --since, "
            "--error-contains",
            returncode=2,
        )
    return True


def filter_of(options: Options, action: bulk.Action) -> bulk.Filter:
    """The filter the options give; its states default to those `action` acts on."""
    return bulk.Filter(
        kinds=tuple(options["kind"]),
        states=tuple(options["state"]) or action.states,
        queues=tuple(options["queue"]),
        since=options["since"],
        error_contains=options["error_contains"] or "",
    )


def act_on_filter(write: Write, options: Options, action: bulk.Action, *, by: str) -> int:
    """`action` on every job the options' filter matches (`act`)."""
    found = filter_of(options, action)
    named = [("kind", kind) for kind in found.kinds] + [("queue", q) for q in found.queues]
    names.check(write, named, strict=options["strict"], using=options["database"])
    jobs = found.jobs(options["database"], timezone.now())
    return act(write, bulk.Selection(jobs, said=str(found)), action, options, by=by)


def act(
    write: Write,
    selection: bulk.Selection,
    action: bulk.Action,
    options: Options,
    *,
    by: str,
    max_attempts: int | None = None,
    ask: Ask | None = None,
) -> int:
    """Count `selection`, say the number, confirm, act, report; the exit status."""
    counted = bulk.count(selection, action)
    write(f"{counted}.")
    if action is bulk.CANCEL and (running := counted.by_state.get(State.RUNNING, 0)):
        hard_kill_after = JobsConfig.load(options["database"]).hard_kill_after
        write(cancelling_running(running, hard_kill_after))
    if not counted.acting:
        return NOT_ALL_DONE if counted.skipped() else OK
    try:
        counted.within(options["max"] or bulk.CAP)
    except bulk.TooMany as error:
        raise CommandError(f"{error} (--max)") from None
    if options["dry_run"]:
        write("Dry run: nothing changed.")
        return OK
    if not options["yes"]:
        ask = ask or terminal_ask
        if not ask(f"{action.said.capitalize()} these {counted.acting:,} jobs? [y/N] "):
            write("Nothing changed (confirm with --yes, or y at the prompt).")
            return NOT_ALL_DONE

    def progress(outcome: bulk.Outcome) -> None:
        if outcome.batches % 10 == 0:
            write(f"... {outcome.touched:,} of {counted.acting:,} so far")

    outcome = bulk.act(selection, counted, by=by, max_attempts=max_attempts, progress=progress)
    write(f"{action.said.capitalize()}: {outcome}.")
    return NOT_ALL_DONE if outcome.skipped or outcome.changed else OK


def terminal_ask(question: str) -> bool:
    """Ask at the terminal; `CommandError` (nothing written) when stdin is not one."""
    if not sys.stdin.isatty():
        raise CommandError(
            "stdin is not a terminal to confirm at: add --yes to act (or --dry-run to count)"
        )
    return input(question).strip().lower() in ("y", "yes")
