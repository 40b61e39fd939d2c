"""`manage.py jobs run-now`: make queued jobs due now, given by id or by a filter
(`jobs.cli.by_filter`), or a schedule's live occurrence, given by the schedule's
name (`--schedule`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS

from jobs import bulk, operations
from jobs.cli import arguments, by_filter, verb
from jobs.cli.ids import acted_on, reported
from jobs.cli.text import Write
from jobs.cli.verb import ID_HELP, NOT_ALL_DONE, Options, Verbs
from jobs.job_ids import IdPrefix
from jobs.schedules import operator
from jobs.schedules.operator import NoSuchSchedule

#: run-now's help, as `--help` shows it.
HELP = (
    "Make queued jobs due now (given by id, or every job a filter matches), or a schedule's "
    "queued occurrence. Exits 1 if any job was skipped."
)


def add_parser(verbs: Verbs) -> None:
    run_now = verb.add(verbs, "run-now", HELP, handle)
    which = run_now.add_mutually_exclusive_group()
    which.add_argument(
        "ids", type=arguments.job_id, nargs="*", default=[], metavar="ID", help=ID_HELP
    )
    which.add_argument(
        "--schedule",
        metavar="NAME",
        help="The schedule whose live occurrence to run now; the next is due at the "
        "fire time it stood for.",
    )
    by_filter.add_filter_arguments(run_now, bulk.RUN_NOW)
    verb.by_argument(run_now, "Who made it due, kept in each job's attempt history")


def handle(write: Write, options: Options) -> int:
    """`run-now`'s options, to `run_now_schedule` or `run_now_jobs`."""
    if options["schedule"] is not None:
        if any(options[name] for name in by_filter.FILTER_OPTIONS):
            raise CommandError("give --schedule or a filter, not both", returncode=2)
        return run_now_schedule(write, options["schedule"], using=options["database"])
    if by_filter.wants_filter(options, options["ids"], besides=" or --schedule NAME"):
        return by_filter.act_on_filter(write, options, bulk.RUN_NOW, by=verb.by(options))
    return run_now_jobs(write, options["ids"], by=verb.by(options), using=options["database"])


def run_now_jobs(
    write: Write,
    ids: Iterable[uuid.UUID | IdPrefix],
    *,
    by: str = "",
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Make queued jobs due now (see `jobs.operations.run_now`)."""
    return acted_on(write, ids, using, partial(operations.run_now, by=by, using=using))


def run_now_schedule(write: Write, name: str, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """Make the schedule `name`'s queued occurrence due now (`jobs.operations.run_now`);
    the next is due at the fire time this one stood for. An unknown name is a
    `CommandError` (exit status 1) written before anything is."""
    try:
        live = operator.get(name, using).live_job
    except NoSuchSchedule as error:
        raise CommandError(str(error)) from None
    if live is None:
        write(f"schedule {name} has no live occurrence (a runner's start queues one)")
        return NOT_ALL_DONE
    write(f"schedule {name}: occurrence {live.id}")
    return reported(write, operations.run_now([live.id], using=using))
