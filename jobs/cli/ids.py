"""The jobs an operator's ids name, and acting on them: shared by `show`, `retry`,
`cancel` and `run-now`.

An id is a whole UUID or a prefix of one (`jobs.job_ids`, parsed by
`jobs.cli.arguments.job_id`); here each is resolved to the one job it names,
before anything is changed, so that an ambiguous prefix stops the command
having done nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS

from jobs import job_ids
from jobs.cli.text import Write, table
from jobs.cli.verb import NOT_ALL_DONE, OK
from jobs.job_ids import IdPrefix
from jobs.models import Job
from jobs.operations import Report

#: How many of the jobs an ambiguous prefix begins are listed.
MATCHES_SHOWN = 10


def _said(ident: uuid.UUID | IdPrefix) -> str:
    return str(ident) if isinstance(ident, uuid.UUID) else f"starting {ident}"


def one_job(ident: uuid.UUID | IdPrefix, *, using: str = DEFAULT_DB_ALIAS) -> Job:
    """The job `ident` names (see `resolve`); `CommandError` when none does."""
    [job_id] = resolve([ident], using=using)
    job = None if job_id is None else Job.objects.using(using).filter(id=job_id).first()
    if job is None:
        raise CommandError(f"No job has the id {_said(ident)}.")
    return job


def resolve(
    idents: Sequence[uuid.UUID | IdPrefix], *, using: str = DEFAULT_DB_ALIAS
) -> list[uuid.UUID | None]:
    """The id each of `idents` names, in order: a whole id as given, a prefix as the one
    job whose id it begins, or None when no job's does.

    A prefix that begins several ids names none of them: the command stops,
    before acting on anything, listing the jobs it begins (exit status 2, as
    for any argument the operator must change).
    """
    found: list[uuid.UUID | None] = []
    ambiguous: list[str] = []
    jobs = Job.objects.using(using)
    for ident in idents:
        if isinstance(ident, uuid.UUID):
            found.append(ident)
            continue
        ids = list(
            jobs.filter(job_ids.matching(ident, using))
            .order_by("id")
            .values_list("id", flat=True)[: MATCHES_SHOWN + 1]
        )
        found.append(ids[0] if len(ids) == 1 else None)
        if len(ids) > 1:
            ambiguous += _ambiguity(ident, ids, using)
    if ambiguous:
        raise CommandError("\n".join(ambiguous), returncode=2)
    return found


def _ambiguity(prefix: IdPrefix, ids: list[uuid.UUID], using: str) -> list[str]:
    """The lines saying which jobs `prefix` begins: id, state, kind and key, as `list` shows."""
    shown = ids[:MATCHES_SHOWN]
    jobs = Job.objects.using(using).filter(id__in=shown).order_by("id")
    count = f"more than {MATCHES_SHOWN}" if len(ids) > MATCHES_SHOWN else str(len(ids))
    rows = [[str(job.id), job.state, job.kind, job.key] for job in jobs]
    return [
        f"The id prefix {prefix} begins {count} jobs' ids; give more of its digits:",
        *(f"  {line}" for line in table(rows)),
    ]


def _unique[T](items: Iterable[T]) -> list[T]:
    return list(dict.fromkeys(items))


def acted_on(
    write: Write,
    idents: Iterable[uuid.UUID | IdPrefix],
    using: str,
    operation: Callable[[list[uuid.UUID]], Report],
) -> int:
    """Run `operation` on the jobs `idents` name; a prefix no job's id begins is
    reported as the operation reports a missing id."""
    found = resolve(_unique(idents), using=using)
    report = operation(_unique(ident for ident in found if ident is not None))
    for _ in range(found.count(None)):
        report.skip("no such job")
    return reported(write, report)


def reported(write: Write, report: Report) -> int:
    """`report` written on its line; the status says whether any job was skipped."""
    write(str(report))
    return NOT_ALL_DONE if report.skipped else OK
