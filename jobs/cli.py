"""What `manage.py jobs` does: the operator's verbs at a shell, for when the admin
is not at hand (an incident over SSH, a script, a cron check).

The command module only parses arguments. The argument types
(`jobs.cli_arguments`) turn text into values or refuse it with a sentence
(argparse then exits 2, or raises `CommandError` under `call_command`); each
verb takes parsed values and a `write` callable and returns the exit status,
so tests can call it without the command. A line a verb writes stays one
line however many newlines a field held (`terminal_safe`). Changes go
through the same doors as the admin (`jobs.operations`,
`jobs.queue.enqueue`, `jobs.stats.collect`), so the command holds no rules
about identity, attempts or fencing of its own; and it says things in the
admin's words (`jobs.presentation`), at the length a shell has room for.

Exit status: 0 when everything asked for was done; 1 when some of it was not
(a job skipped, an enqueue refused as a duplicate) or the command failed
(`CommandError`); 2 for arguments the parser refused.
"""

from __future__ import annotations

import getpass
import json
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs import job_ids, operations
from jobs.job_ids import IdPrefix
from jobs.models import LIVE_STATES, Job, State
from jobs.operations import Report
from jobs.presentation import duration, indented_json, next_run, relative, telling_line
from jobs.queue import enqueue
from jobs.registry import registry
from jobs.spec import InvalidJobSpec, JobSpec
from jobs.stats import Stats, collect, kinds_without_runner

#: Where a verb writes its lines (the command's `self.stdout.write`).
Write = Callable[[str], None]


#: The Unicode categories `terminal_safe` escapes: controls (newline and tab
#: among them), format characters (a right-to-left override), lone surrogates
#: (which no terminal encoding can write) and the line and paragraph separators.
UNSAFE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def terminal_safe(text: str) -> str:
    """`text` on one line, with every character a terminal would obey written as its escape.

    Kinds, keys, payloads and errors come from callers, handlers and upstream
    services; printed raw, an escape sequence in one (`\\x1b[2J`, a carriage
    return, a right-to-left override) would be obeyed by the operator's
    terminal instead of shown, and a newline would start a line that reads
    as another job's row. Printable text, in any script, is kept as written.
    """
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in UNSAFE
        else char
        for char in text
    )


#: Everything asked for was done.
OK = 0
#: Some of it was not: a job skipped, an enqueue refused as a duplicate.
NOT_ALL_DONE = 1

#: How many jobs `list` shows unless told otherwise: a screenful, newest first.
DEFAULT_LIMIT = 50
#: `list` shows this much of the telling line of `last_error`; `show` has it all.
ERROR_WIDTH = 80

STATES = [state.value for state in State]


# --- Arguments ------------------------------------------------------------------


def default_by() -> str:
    """Who a cancel is by, when not told: the operating-system user at the shell."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (some containers)
        user = "unknown user"
    return f"cli:{user}"


# --- Formatting -----------------------------------------------------------------


def error_line(text: str, width: int = ERROR_WIDTH) -> str:
    """The telling line of `last_error` (`jobs.presentation.telling_line`), cut to `width`."""
    line = terminal_safe(telling_line(text))
    return line if len(line) <= width else line[: width - 1] + "…"


def table(cells: Sequence[Sequence[str]]) -> list[str]:
    """Rows as lines with aligned columns, each cell `terminal_safe`; the last column is
    left ragged."""
    rows = [[terminal_safe(cell) for cell in row] for row in cells]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines


# --- Verbs ----------------------------------------------------------------------


def list_jobs(
    write: Write,
    *,
    states: Iterable[str] = (),
    kinds: Iterable[str] = (),
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
    if has_error:
        jobs = jobs.exclude(last_error="")
    if lease_expired:
        jobs = jobs.filter(state=State.RUNNING, lease_expires_at__lt=now)
    found = list(jobs.order_by("-created_at", "-id")[: limit + 1])
    if not found:
        write("No jobs match.")
        return OK
    rows = [["ID", "STATE", "KIND", "KEY", "ATTEMPTS", "WHEN", "LAST ERROR"]]
    rows += [
        [
            str(job.id),
            job.state,
            job.kind,
            job.key,
            f"{job.attempts}/{job.max_attempts}",
            next_run(job, now),
            error_line(job.last_error),
        ]
        for job in found[:limit]
    ]
    for line in table(rows):
        write(line)
    if len(found) > limit:
        write(f"(the newest {limit} shown; more match: raise --limit or narrow the filters)")
    return OK


def show_job(write: Write, ident: uuid.UUID | IdPrefix, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """Every field of one job, each on its line; the payload (as indented JSON) and
    `last_error` (in full) as blocks whose lines are indented, so that no line of
    theirs reads as a field."""
    [job_id] = resolve([ident], using=using)
    job = None if job_id is None else Job.objects.using(using).filter(id=job_id).first()
    if job is None:
        raise CommandError(f"No job has the id {_said(ident)}.")
    now = timezone.now()
    fields = [field.name for field in Job._meta.concrete_fields]
    width = max(len(name) for name in fields) + 1
    for name in fields:
        value = getattr(job, name)
        label = f"{name}:".ljust(width)
        if name == "payload" and value:
            write(label)
            # JSON escapes a newline inside a string: each "\n" left ends a line.
            for line in indented_json(value).split("\n"):
                write(f"  {terminal_safe(line)}")
        elif name == "payload":
            write(f"{label} {{}}")
        elif name == "last_error":
            if value:
                write(label)
                for line in value.rstrip().split("\n"):
                    write(f"  {terminal_safe(line.removesuffix('\r'))}")
            else:
                write(f"{label} (none)")
        elif isinstance(value, datetime):
            write(f"{label} {value.isoformat()} ({relative(value, now)})")
        elif value is None:
            write(f"{label} -")
        else:
            write(f"{label} {terminal_safe(str(value))}")
    handled = "registered in this project" if registry.get(job.kind) else "none in this project"
    write(f"{'handler:'.ljust(width)} {handled}")
    return OK


#: How many of the jobs an ambiguous prefix begins are listed.
MATCHES_SHOWN = 10


def _said(ident: uuid.UUID | IdPrefix) -> str:
    return str(ident) if isinstance(ident, uuid.UUID) else f"starting {ident}"


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


def print_stats(write: Write, *, as_json: bool = False, using: str = DEFAULT_DB_ALIAS) -> int:
    """The dashboard's numbers as text, or `Stats.as_json()` for scripts."""
    stats = collect(using=using)
    if as_json:
        # One write per line: `write` keeps each on one line. JSON escapes
        # a newline within a string, so each "\n" left ends a line.
        for line in json.dumps(stats.as_json(), indent=2, sort_keys=True).split("\n"):
            write(line)
        return OK
    for line in stats_lines(stats, kinds_without_runner(using=using, now=stats.now)):
        write(line)
    return OK


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{state} {n}" for state, n in counts.items())


def stats_lines(stats: Stats, unhandled: Sequence[str] = ()) -> list[str]:
    """The dashboard, as lines of text."""
    now = stats.now
    lines = [f"Jobs at {now.isoformat(timespec='seconds')}"]
    width = max(len(state) for state in stats.by_state)
    number = max(len(str(n)) for n in stats.by_state.values())
    for state, n in stats.by_state.items():
        estimated = " (estimated)" if stats.estimated and state not in LIVE_STATES else ""
        lines.append(f"  {state.ljust(width)}  {str(n).rjust(number)}{estimated}")
    lines.append(
        f"Lag: {duration(stats.lag_seconds)} (how long the oldest ready job has waited)"
        if stats.lag_seconds
        else "Lag: none (no ready job is waiting)"
    )
    lines.append(f"Settled in the last 5 minutes: {_counts(stats.last_5_minutes)}")
    lines.append(f"Settled in the last hour:      {_counts(stats.last_hour)}")
    if stats.live_by_kind:
        lines.append("Live jobs by kind:")
        rows = [[kind, _counts(counts)] for kind, counts in sorted(stats.live_by_kind.items())]
        lines += [f"  {line}" for line in table(rows)]
    if stats.slowest_kinds:
        lines.append("Slowest kinds (mean attempt over the last hour):")
        rows = [
            [k["kind"], f"{k['mean_seconds']:.3f} s", f"over {k['count']} jobs"]
            for k in stats.slowest_kinds
        ]
        lines += [f"  {line}" for line in table(rows)]
    if stats.runners:
        lines.append("Runners:")
        rows = [
            [
                r.name,
                r.version,
                f"running {r.running}/{r.max_concurrent}",
                f"heartbeat {relative(r.heartbeat_at, now)}",
                ("GONE " if r.gone else "") + f"kinds: {', '.join(r.kinds) or '-'}",
            ]
            for r in stats.runners
        ]
        lines += [f"  {line}" for line in table(rows)]
    else:
        lines.append("Runners: none (no `runjobs` process has reported itself)")
    if unhandled:
        lines.append(f"Live kinds no live runner handles: {', '.join(unhandled)}")
    return lines
