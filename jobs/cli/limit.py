"""`manage.py jobs limit`: a kind's concurrency limit across every runner, written
through `jobs.controls` (which logs it, naming who)."""

from __future__ import annotations

from jobs import controls
from jobs.cli import arguments, verb
from jobs.cli.text import Write
from jobs.cli.verb import OK, Options, Verbs

#: limit's help, as `--help` shows it.
HELP = (
    "Set a kind's concurrency limit across every runner, in place of its handler's "
    "(0 holds its jobs), from each runner's next claim; --clear gives it back."
)


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
    verb.by_argument(parser)


def handle(write: Write, options: Options) -> int:
    """`limit`'s options, to `limit`."""
    value = None if options["clear"] else options["limit"]
    return limit(write, options["kind"], value, by=verb.by(options), using=options["database"])


def limit(write: Write, kind: str, value: int | None, *, by: str, using: str) -> int:
    """Set a kind's concurrency limit in the database, or give it back to its handler."""
    controls.set_limit(kind, by, value, using=using)
    if value is None:
        write(f"kind {kind} takes its handler's concurrency_limit again (by {by})")
    elif value == 0:
        write(f"kind {kind} held: limit 0, no new attempt starts (by {by})")
    else:
        write(f"kind {kind} limited to {value} attempts at once across every runner (by {by})")
    return OK
