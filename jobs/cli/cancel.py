"""`manage.py jobs cancel`: retire waiting, queued or running jobs as cancelled, naming who;
given by id or by a filter (`jobs.cli.by_filter`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db import DEFAULT_DB_ALIAS

from jobs import bulk, operations
from jobs.cli import arguments, by_filter, verb
from jobs.cli.ids import acted_on
from jobs.cli.text import Write
from jobs.cli.verb import ID_HELP, Options, Verbs
from jobs.job_ids import IdPrefix
from jobs.models import Job, JobsConfig, State
from jobs.presentation import cancelling_running

#: cancel's help, as `--help` shows it.
HELP = (
    "Retire waiting, queued or running jobs as cancelled (each handler's abandon runs once): "
    "those given by id, or every queued or running job a filter matches. A workflow's step "
    "waiting for one cancelled is cancelled too unless it runs once its dependencies "
    "settled, whatever the outcome (`jobs workflow cancel` cancels a whole workflow). A "
    "running handler is not stopped: a hung one ends only when its runner process restarts, "
    "hard_kill_after past its budget. "
    "Exits 1 if any job was skipped."
)


def add_parser(verbs: Verbs) -> None:
    cancel = verb.add(verbs, "cancel", HELP, handle)
    cancel.add_argument("ids", type=arguments.job_id, nargs="*", metavar="ID", help=ID_HELP)
    verb.by_argument(cancel, "Who cancelled, kept in last_error")
    by_filter.add_filter_arguments(cancel, bulk.CANCEL)


def handle(write: Write, options: Options) -> int:
    """`cancel`'s options, to `cancel_jobs`, or by filter to `jobs.cli.by_filter`."""
    if by_filter.wants_filter(options, options["ids"]):
        return by_filter.act_on_filter(write, options, bulk.CANCEL, by=verb.by(options))
    return cancel_jobs(write, options["ids"], by=verb.by(options), using=options["database"])


def cancel_jobs(
    write: Write, ids: Iterable[uuid.UUID | IdPrefix], *, by: str, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Retire waiting, queued or running jobs as cancelled (see `jobs.operations.cancel`);
    when some it cancelled were running, say after the report what the cancel
    did not do."""
    running: list[uuid.UUID] = []

    def cancel(found: list[uuid.UUID]) -> operations.Report:
        jobs = Job.objects.using(using).filter(id__in=found, state=State.RUNNING)
        running.extend(jobs.values_list("id", flat=True))
        return operations.cancel(found, by=by, using=using)

    status = acted_on(write, ids, using, cancel)
    if running:
        jobs = Job.objects.using(using).filter(id__in=running, state=State.CANCELLED)
        if count := jobs.count():
            hard_kill_after = JobsConfig.load(using).hard_kill_after
            write(cancelling_running(count, hard_kill_after, done=True))
    return status
