"""`manage.py jobs pause` and `resume`: the operator's switch on a queue or a kind,
written through `jobs.controls` (which logs each, naming who).

A name nothing else knows is warned about (`jobs.cli.names`; refused with
`--strict`), and a switch already where it was asked to be is said so and
written nowhere: a resume of what was never paused leaves no row behind.
"""

from __future__ import annotations

from jobs import controls
from jobs.cli import arguments, names, verb
from jobs.cli.text import Write
from jobs.cli.verb import OK, Options, Verbs
from jobs.models import Control


def add_parser(verbs: Verbs) -> None:
    """`pause` and `resume`, which take the same arguments."""
    for name, help in (
        (
            "pause",
            "Pause a queue or a kind: runners start no new attempt of it from "
            "their next claim; running attempts finish, queued jobs wait, enqueue still works.",
        ),
        ("resume", "Resume a paused queue or kind."),
    ):
        control = verb.add(verbs, name, help, handle)
        target = control.add_mutually_exclusive_group(required=True)
        target.add_argument("--queue", type=arguments.queue_name, help="A queue's name.")
        target.add_argument("--kind", type=arguments.kind, help="A kind.")
        names.strict_argument(control)
        verb.by_argument(control)


def handle(write: Write, options: Options) -> int:
    """`pause`'s or `resume`'s options, to `pause`."""
    scope = "queue" if options["queue"] else "kind"
    return pause(
        write,
        scope,
        options[scope],
        paused=options["verb"] == "pause",
        by=verb.by(options),
        using=options["database"],
        strict=options["strict"],
    )


def pause(
    write: Write,
    scope: str,
    name: str,
    *,
    paused: bool,
    by: str,
    using: str,
    strict: bool = False,
) -> int:
    """Pause or resume a queue or kind; says so, and what it means."""
    names.check(write, [(scope, name)], strict=strict, using=using)
    change = controls.pause(scope, name, by, paused, using=using)
    if not change.changed:
        write(unchanged(scope, name, paused, change.row))
    elif paused:
        write(
            f"paused {scope} {name} (by {by}): runners claim none of its jobs from their next "
            "claim; running attempts finish, and jobs can still be queued"
        )
    else:
        write(f"resumed {scope} {name} (by {by})")
    return OK


def unchanged(scope: str, name: str, paused: bool, row: Control | None) -> str:
    """What a pause of the paused, or a resume of the running, says instead."""
    was = "already paused" if paused else "not paused"
    if row is None:
        return f"{scope} {name} was {was}; nothing changed"
    return f"{scope} {name} was {was} ({last_changed(row)}); nothing changed"


def last_changed(row: Control) -> str:
    """Who changed a control row last, and when: what a change that changed nothing cites."""
    return f"its control was last changed by {row.changed_by} at " + row.changed_at.isoformat(
        timespec="seconds"
    )
