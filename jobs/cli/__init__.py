"""What `manage.py jobs` does: the operator's verbs at a shell, for when the admin
is not at hand (an incident over SSH, a script, a cron check).

The command module only parses arguments. The argument types
(`jobs.cli.arguments`) turn text into values or refuse it with a sentence
(argparse then exits 2, or raises `CommandError` under `call_command`); each
verb takes parsed values and a `write` callable and returns the exit status,
so tests can call it without the command; `show` is rendered in
`jobs.cli.show` and `stats` in `jobs.cli.stats`. A line a verb writes stays
one line however many newlines a field held (`jobs.cli.text.terminal_safe`).
Changes go through the same doors as the admin (`jobs.operations`,
`jobs.queue.enqueue`, `jobs.stats.collect`), so the command holds no rules
about identity, attempts or fencing of its own; and it says things in the
admin's words (`jobs.presentation`), at the length a shell has room for.

Exit status: 0 when everything asked for was done; 1 when some of it was not
(a job skipped, an enqueue refused as a duplicate) or the command failed
(`CommandError`); 2 for arguments the parser refused.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs import job_ids, operations
from jobs.cli.text import Write, error_line, table, terminal_safe
from jobs.holding import RUNNER_GONE, Holders
from jobs.job_ids import IdPrefix
from jobs.models import LIVE_STATES, Job, State
from jobs.operations import Report
from jobs.presentation import next_run
from jobs.queue import enqueue
from jobs.registry import registry
from jobs.spec import InvalidJobSpec, JobSpec

#: Everything asked for was done.
OK = 0
#: Some of it was not: a job skipped, an enqueue refused as a duplicate.
NOT_ALL_DONE = 1

#: How many jobs `list` shows unless told otherwise: a screenful, newest first.
DEFAULT_LIMIT = 50

STATES = [state.value for state in State]


# --- Arguments ------------------------------------------------------------------


def default_by() -> str:
    """Who a cancel is by, when not told: the operating-system user at the shell."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (some containers)
        user = "unknown user"
    return f"cli:{user}"


# --- Verbs ----------------------------------------------------------------------


def list_jobs(
    write: Write,
    *,
    states: Iterable[str] = (),
    kinds: Iterable[str] = (),
    queues: Iterable[str] = (),
    has_error: bool = False,
    lease_expired: bool = False,
    limit: int = DEFAULT_LIMIT,
    using: str = DEFAULT_DB_ALIAS,
    now: datetime | None = None,
) -> int:
    """One line per job, newest first, filtered as the admin's list filters do."""
    now = now or timezone.now()
    jobs = Job.objects.using(using).all()
    if states := list(states):
        jobs = jobs.filter(state__in=states)
    if kinds := list(kinds):
        jobs = jobs.filter(kind__in=kinds)
    if queues := list(queues):
        jobs = jobs.filter(queue__in=queues)
    if has_error:
        jobs = jobs.exclude(last_error="")
    if lease_expired:
        jobs = jobs.filter(state=State.RUNNING, lease_expires_at__lt=now)
    found = list(jobs.order_by("-created_at", "-id")[: limit + 1])
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


def _acted_on(
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
    return _reported(write, report)


def _reported(write: Write, report: Report) -> int:
    write(str(report))
    return NOT_ALL_DONE if report.skipped else OK


def retry_jobs(
    write: Write, ids: Iterable[uuid.UUID | IdPrefix], *, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Queue failed or cancelled jobs again (see `jobs.operations.retry`)."""
    return _acted_on(write, ids, using, partial(operations.retry, using=using))


def cancel_jobs(
    write: Write, ids: Iterable[uuid.UUID | IdPrefix], *, by: str, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Retire queued or running jobs as cancelled (see `jobs.operations.cancel`)."""
    return _acted_on(write, ids, using, partial(operations.cancel, by=by, using=using))


def run_now_jobs(
    write: Write, ids: Iterable[uuid.UUID | IdPrefix], *, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Make queued jobs due now (see `jobs.operations.run_now`)."""
    return _acted_on(write, ids, using, partial(operations.run_now, using=using))


def enqueue_job(
    write: Write,
    kind: str,
    key: str,
    *,
    payload: dict[str, Any] | None = None,
    delay: timedelta | None = None,
    max_attempts: int | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Queue one job through `jobs.queue.enqueue`; a live duplicate is an answer, status 1."""
    spec = JobSpec.now(kind, key).with_payload(payload or {}).with_max_attempts(max_attempts)
    try:
        if delay:
            spec = spec.with_delay(delay)
        queued = enqueue(spec, using=using)
    except InvalidJobSpec as error:
        raise CommandError(
            f"Invalid job: {terminal_safe(str(error))}. Nothing was queued."
        ) from None
    live = Job.objects.using(using).filter(kind=kind, key=key, state__in=LIVE_STATES).first()
    if not queued:
        held_by = f": id {live.id}, {live.state}" if live else ""
        write(f"already queued (a live job holds {kind}:{key}{held_by})")
        return NOT_ALL_DONE
    detail = f" (id {live.id}, {next_run(live, timezone.now())})" if live else ""
    write(f"queued {kind}:{key}{detail}")
    if registry.get(kind) is None:
        write(
            f"note: no handler for kind {kind!r} is registered in this project; "
            "only a runner that has one will run it"
        )
    return OK
