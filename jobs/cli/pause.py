"""`manage.py jobs pause` and `resume`: the operator's switch on a queue or a kind,
written through `jobs.controls` (which logs each, naming who)."""

from __future__ import annotations

from jobs import controls
from jobs.cli import arguments, verb
from jobs.cli.text import Write
from jobs.cli.verb import OK, Options, Verbs


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
    )


def pause(write: Write, scope: str, name: str, *, paused: bool, by: str, using: str) -> int:
    """Pause or resume a queue or kind; says so, and what it means."""
    controls.pause(scope, name, by, paused, using=using)
    if paused:
        write(
            f"paused {scope} {name} (by {by}): runners claim none of its jobs from their next "
            "claim; running attempts finish, and jobs can still be queued"
        )
    else:
        write(f"resumed {scope} {name} (by {by})")
    return OK
