"""`manage.py jobs list`: one line per job, newest first, filtered as the admin's list is
(and by workflow: `--workflow`).

A kind or queue no job could have is refused as an argument; one that nothing
names (`jobs.cli.names`) is warned about, so that "No jobs match" is not read
as an empty queue when the name was mistyped (refused with `--strict`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs.cli import arguments, names, verb
from jobs.cli.text import Write, error_line, table
from jobs.cli.verb import OK, Options, Verbs
from jobs.holding import RUNNER_GONE, Holders
from jobs.models import Job, State
from jobs.presentation import next_run
from jobs.workflows import operator
from jobs.workflows.operator import UnknownWorkflow

#: How many jobs `list` shows unless told otherwise: a screenful, newest first.
DEFAULT_LIMIT = 50

STATES = [state.value for state in State]


#: list's help, as `--help` shows it.
HELP = "List jobs, newest first, one line each."


def add_parser(verbs: Verbs) -> None:
    """`list`'s filters, the admin list's, and its limit."""
    listing = verb.add(verbs, "list", HELP, handle)
    listing.add_argument(
        "--state",
        action="append",
        choices=STATES,
        default=[],
        help="Only jobs in this state (repeatable).",
    )
    listing.add_argument(
        "--kind",
        action="append",
        type=arguments.kind,
        default=[],
        help="Only jobs of this kind (repeatable).",
    )
    listing.add_argument(
        "--queue",
        action="append",
        type=arguments.queue_name,
        default=[],
        help="Only jobs of this queue (repeatable).",
    )
    listing.add_argument(
        "--workflow",
        metavar="ID",
        help="Only the steps of this workflow: its id, one of its steps' ids, or 8 or more "
        "of its first hex digits.",
    )
    listing.add_argument(
        "--has-error", action="store_true", help="Only jobs whose last_error is not empty."
    )
    listing.add_argument(
        "--lease-expired",
        action="store_true",
        help="Only running jobs whose lease has expired (their runner is likely gone).",
    )
    low, high = arguments.LIMIT_RANGE
    listing.add_argument(
        "--limit",
        type=arguments.limit,
        default=DEFAULT_LIMIT,
        help=f"Show at most this many, {low} to {high:,} (default {DEFAULT_LIMIT}).",
    )
    names.strict_argument(listing, refused="listing")


def handle(write: Write, options: Options) -> int:
    """`list`'s options, to `list_jobs`."""
    return list_jobs(
        write,
        states=options["state"],
        kinds=options["kind"],
        queues=options["queue"],
        workflow=options["workflow"],
        has_error=options["has_error"],
        lease_expired=options["lease_expired"],
        limit=options["limit"],
        using=options["database"],
        strict=options["strict"],
    )


def list_jobs(
    write: Write,
    *,
    states: Iterable[str] = (),
    kinds: Iterable[str] = (),
    queues: Iterable[str] = (),
    workflow: str | None = None,
    has_error: bool = False,
    lease_expired: bool = False,
    limit: int = DEFAULT_LIMIT,
    using: str = DEFAULT_DB_ALIAS,
    now: datetime | None = None,
    strict: bool = False,
) -> int:
    """One line per job, newest first, filtered as the admin's list filters do;
    a `workflow` no workflow's id names is refused (exit status 2)."""
    now = now or timezone.now()
    kinds, queues = list(kinds), list(queues)
    jobs = Job.objects.using(using).all()
    if workflow is not None:
        try:
            jobs = jobs.filter(workflow_id=operator.resolve(workflow, using=using))
        except UnknownWorkflow as error:
            raise CommandError(str(error), returncode=2) from None
    if states := list(states):
        jobs = jobs.filter(state__in=states)
    if kinds:
        jobs = jobs.filter(kind__in=kinds)
    if queues:
        jobs = jobs.filter(queue__in=queues)
    if has_error:
        jobs = jobs.exclude(last_error="")
    if lease_expired:
        jobs = jobs.filter(state=State.RUNNING, lease_expires_at__lt=now)
    found = list(jobs.order_by("-created_at", "-id")[: limit + 1])
    listed = {("kind", job.kind) for job in found} | {("queue", job.queue) for job in found}
    named = [("kind", kind) for kind in kinds] + [("queue", queue) for queue in queues]
    if unlisted := [pair for pair in named if pair not in listed]:

        def seen(scope: str, name: str) -> bool:
            """A name some job has, settled ones too: what `list` can show."""
            return Job.objects.using(using).filter(**{scope: name}).exists()

        names.check(
            write, unlisted, strict=strict, using=using, done="Nothing was listed.", seen=seen
        )
    if not found:
        write("No jobs match.")
        return OK
    holders = Holders.read(using, now)
    rows = [["ID", "STATE", "KIND", "KEY", "ATTEMPTS", "WHEN", "LAST ERROR"]]
    rows += [
        [
            str(job.id),
            job.state,
            job.kind,
            job.key,
            f"{job.attempts}/{job.max_attempts}",
            when(job, holders),
            error_line(job.last_error),
        ]
        for job in found[:limit]
    ]
    for line in table(rows):
        write(line)
    if len(found) > limit:
        write(f"(the newest {limit} shown; more match: raise --limit or narrow the filters)")
    return OK


def when(job: Job, holders: Holders) -> str:
    """The moment that matters for a job (`jobs.presentation.next_run`); for a
    running job whose runner is gone, that first: its lease says nothing then."""
    moment = next_run(job, holders.now)
    return f"{RUNNER_GONE}, {moment}" if holders.stuck(job) == RUNNER_GONE else moment
