"""Kinds and queues an operator names at a shell that nothing else names: most
likely a typo, which would otherwise pause, limit or list nothing in silence.

"Unknown" is decided here, once, for every verb. A kind is known when a
handler for it is registered in this project or a runner row reports having
one (another deployment's runner, sharing the database). A queue is known
when it is "default", a registered handler's queue, a queue a runner row
serves, a control row's name, or a live job's queue (for `list`, any job's:
it lists settled jobs too). An unknown name is
warned about and acted on (another deployment may yet bring it); `--strict`
refuses it instead, before anything is written. A name that no job could
ever have (`jobs.spec`'s rules) is refused by the argument types, with or
without `--strict`.
"""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Callable, Iterable

from django.core.management.base import CommandError

from jobs.cli.text import Write
from jobs.models import LIVE_ROWS, Control, Job, RunnerProcess
from jobs.registry import registry
from jobs.spec import DEFAULT_QUEUE

#: What `--strict` refuses, by scope, in its help.
UNKNOWN = {
    "kind": "a kind no handler here or runner reports",
    "queue": "a queue no job, runner, handler or control names",
}


def strict_argument(
    parser: ArgumentParser, scopes: tuple[str, ...] = ("kind", "queue"), refused: str = "changing"
) -> None:
    """`--strict`: an unknown kind or queue is refused instead of warned about;
    `refused` is what the verb then does nothing of ("changing", "queueing")."""
    which = " or ".join(UNKNOWN[scope] for scope in scopes)
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"Refuse {which}, {refused} nothing (without --strict: a warning, and go on).",
    )


def unknown_kind(kind: str, using: str) -> bool:
    """Whether no handler for `kind` is registered here and no runner row reports one."""
    if registry.get(kind) is not None:
        return False
    reported = RunnerProcess.objects.using(using).values_list("kinds", flat=True)
    return not any(isinstance(kinds, list) and kind in kinds for kinds in reported)


def unknown_queue(queue: str, using: str) -> bool:
    """Whether nothing names `queue`: not the default, no handler's, no runner's,
    no control's, no live job's. The cheap sources are asked first; the live
    jobs last, and only for a name none of them knows."""
    if queue == DEFAULT_QUEUE or any(handler.queue == queue for handler in registry):
        return False
    served = RunnerProcess.objects.using(using).values_list("queues", flat=True)
    if any(isinstance(queues, list) and queue in queues for queues in served):
        return False
    if Control.objects.using(using).filter(scope=Control.Scope.QUEUE, name=queue).exists():
        return False
    # By `live`, which the live rows' partial index reads: the backlog is
    # scanned, never the settled history.
    return not Job.objects.using(using).filter(LIVE_ROWS, queue=queue).exists()


def why_unknown(scope: str, name: str) -> str:
    """The sentence an unknown `name` of `scope` ("kind" or "queue") gets."""
    if scope == "kind":
        return (
            f"no handler for kind {name!r} is registered in this project, and no runner reports one"
        )
    return f"no job, runner, handler or control names queue {name!r}"


def check(
    write: Write,
    names: Iterable[tuple[str, str]],
    *,
    strict: bool,
    using: str,
    done: str = "Nothing was changed.",
    seen: Callable[[str, str], bool] | None = None,
) -> None:
    """Warn about each unknown (scope, name) of `names`, or with `strict` refuse
    the first with `CommandError` (`done` says what was left undone). `seen`,
    asked last, may know a name for the caller's own reasons."""
    for scope, name in names:
        unknown = unknown_kind(name, using) if scope == "kind" else unknown_queue(name, using)
        if not unknown or (seen is not None and seen(scope, name)):
            continue
        if strict:
            raise CommandError(f"Unknown {scope}: {why_unknown(scope, name)} (--strict). {done}")
        write(f"warning: {why_unknown(scope, name)}; check the spelling (--strict refuses it)")
