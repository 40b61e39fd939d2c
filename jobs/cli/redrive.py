"""`manage.py jobs redrive`: retry every job of one dead-letter group (a kind and
the telling line of its error, as `jobs dead` lists them), through the bulk
steps (`jobs.cli.by_filter`): counted, confirmed, in batches, with a new
attempt budget if asked."""

from __future__ import annotations

import argparse

from jobs import bulk, dead_letters
from jobs.cli import arguments, by_filter, names, verb
from jobs.cli.text import Write
from jobs.cli.verb import Options, Verbs

#: redrive's help, as `--help` shows it.
HELP = (
    "Retry every failed or cancelled job of one dead-letter group (see dead), due now, "
    "with a fresh attempt budget. Exits 1 if any job was skipped."
)


def line(text: str) -> str:
    """`--error`: a group's line, as `dead` prints it (1 to 1,000 characters)."""
    if not 0 < len(text) <= dead_letters.LINE_MAX:
        raise argparse.ArgumentTypeError(f"must be 1 to {dead_letters.LINE_MAX:,} characters")
    return text


def add_parser(verbs: Verbs) -> None:
    redrive = verb.add(verbs, "redrive", HELP, handle)
    redrive.add_argument("--kind", required=True, type=arguments.kind, help="The group's kind.")
    redrive.add_argument(
        "--error",
        required=True,
        type=line,
        metavar="LINE",
        help="The group's error line, exactly as dead prints it.",
    )
    low, high = arguments.MAX_ATTEMPTS_RANGE
    redrive.add_argument(
        "--attempts",
        type=arguments.max_attempts,
        metavar="N",
        help=f"Give each job N attempts from now ({low} to {high:,}; its max_attempts "
        "becomes N, its attempt count starts again). Default: its own max_attempts again.",
    )
    by_filter.confirm_arguments(redrive)


def handle(write: Write, options: Options) -> int:
    """`redrive`'s options, to `jobs.cli.by_filter.act` on the group's selection."""
    names.check(
        write, [("kind", options["kind"])], strict=options["strict"], using=options["database"]
    )
    selection = dead_letters.selection(options["kind"], options["error"], options["database"])
    return by_filter.act(
        write,
        selection,
        bulk.RETRY,
        options,
        by=verb.default_by(),
        max_attempts=options["attempts"],
    )
