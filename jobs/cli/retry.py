"""`manage.py jobs retry`: queue failed or cancelled jobs again, due now, given by id
or by a filter (`jobs.cli.by_filter`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial

from django.db import DEFAULT_DB_ALIAS

from jobs import bulk, operations
from jobs.cli import arguments, by_filter, verb
from jobs.cli.ids import acted_on
from jobs.cli.text import Write
from jobs.cli.verb import ID_HELP, Options, Verbs
from jobs.job_ids import IdPrefix

#: retry's help, as `--help` shows it.
HELP = (
    "Queue failed or cancelled jobs again, due now, with a fresh attempt budget: those "
    "given by id, or every job a filter matches. Exits 1 if any job was skipped."
)


def add_parser(verbs: Verbs) -> None:
    retry = verb.add(verbs, "retry", HELP, handle)
    retry.add_argument("ids", type=arguments.job_id, nargs="*", metavar="ID", help=ID_HELP)
    by_filter.add_filter_arguments(retry, bulk.RETRY)
    verb.by_argument(retry, "Who retried, kept in each job's attempt history")


def handle(write: Write, options: Options) -> int:
    """`retry`'s options, to `retry_jobs`, or by filter to `jobs.cli.by_filter.act`."""
    if by_filter.wants_filter(options, options["ids"]):
        return by_filter.act_on_filter(write, options, bulk.RETRY, by=verb.by(options))
    return retry_jobs(write, options["ids"], by=verb.by(options), using=options["database"])


def retry_jobs(
    write: Write,
    ids: Iterable[uuid.UUID | IdPrefix],
    *,
    by: str = "",
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Queue failed or cancelled jobs again (see `jobs.operations.retry`)."""
    return acted_on(write, ids, using, partial(operations.retry, by=by, using=using))
