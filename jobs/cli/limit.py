"""`manage.py jobs limit`: a kind's concurrency limit across every runner, written
through `jobs.controls` (which logs it, naming who).

Limits are per kind, so `--queue` is refused in words rather than left for
argparse to misread; a kind nothing else knows is warned about
(`jobs.cli.names`; refused with `--strict`), and a limit already in force is
said so and written nowhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from jobs import controls
from jobs.cli import arguments, names, verb
from jobs.cli.pause import last_changed
from jobs.cli.text import Write
from jobs.cli.verb import OK, Options, Verbs

#: limit's help, as `--help` shows it.
HELP = (
    "Set a kind's concurrency limit across every runner, in place of its handler's "
    "(0 holds its jobs), from each runner's next claim; --clear gives it back."
)

#: What `limit --queue` is told.
PER_KIND = (
    "limits are per kind, not per queue: give --kind K for each kind to limit "
    "(or pause the queue: jobs pause --queue Q)"
)


class PerKindOnly(argparse.Action):
    """`--queue`, refused with the reason as soon as it is read."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        raise argparse.ArgumentError(self, PER_KIND)


def add_parser(verbs: Verbs) -> None:
    """`limit`'s kind, and either N or `--clear`."""
    parser = verb.add(verbs, "limit", HELP, handle)
    parser.add_argument("--kind", type=arguments.kind, required=True, help="A kind.")
    value = parser.add_mutually_exclusive_group(required=True)
    value.add_argument(
        "limit",
        type=arguments.concurrency_limit,
        nargs="?",
        metavar="N",
        help="At most N attempts of the kind at once.",
    )
    value.add_argument(
        "--clear", action="store_true", help="Use the handler's concurrency_limit again."
    )
    parser.add_argument(
        "--queue",
        action=PerKindOnly,
        nargs="?",
        metavar="QUEUE",
        help="Refused: limits are per kind (pause a queue instead).",
    )
    names.strict_argument(parser, ("kind",))
    verb.by_argument(parser)


def handle(write: Write, options: Options) -> int:
    """`limit`'s options, to `limit`."""
    value = None if options["clear"] else options["limit"]
    return limit(
        write,
        options["kind"],
        value,
        by=verb.by(options),
        using=options["database"],
        strict=options["strict"],
    )


def limit(
    write: Write, kind: str, value: int | None, *, by: str, using: str, strict: bool = False
) -> int:
    """Set a kind's concurrency limit in the database, or give it back to its handler."""
    names.check(write, [("kind", kind)], strict=strict, using=using)
    change = controls.set_limit(kind, by, value, using=using)
    if not change.changed:
        was = (
            "had no limit set in the database"
            if value is None
            else f"was already limited to {value}"
        )
        cited = f" ({last_changed(change.row)})" if change.row else ""
        write(f"kind {kind} {was}{cited}; nothing changed")
    elif value is None:
        write(f"kind {kind} takes its handler's concurrency_limit again (by {by})")
    elif value == 0:
        write(f"kind {kind} held: limit 0, no new attempt starts (by {by})")
    else:
        write(f"kind {kind} limited to {value} attempts at once across every runner (by {by})")
    return OK
