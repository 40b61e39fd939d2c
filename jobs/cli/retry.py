"""`manage.py jobs retry`: queue failed or cancelled jobs again, due now."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial

from django.db import DEFAULT_DB_ALIAS

from jobs import operations
from jobs.cli import arguments, verb
from jobs.cli.ids import acted_on
from jobs.cli.text import Write
from jobs.cli.verb import ID_HELP, Options, Verbs
from jobs.job_ids import IdPrefix

#: retry's help, as `--help` shows it.
HELP = (
    "Queue failed or cancelled jobs again, due now, with a fresh attempt budget. "
    "Exits 1 if any job was skipped."
)


def add_parser(verbs: Verbs) -> None:
    retry = verb.add(verbs, "retry", HELP, handle)
    retry.add_argument("ids", type=arguments.job_id, nargs="+", metavar="ID", help=ID_HELP)
    verb.by_argument(retry, "Who retried, kept in each job's attempt history")


def handle(write: Write, options: Options) -> int:
    """`retry`'s options, to `retry_jobs`."""
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
