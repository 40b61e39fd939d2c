"""`manage.py jobs show`: one job as text, or as JSON for scripts.

Its own module because a job's page has grown past a list of fields: who
holds it and whether that holder is still there (`jobs.holding`), and its
attempt record (`jobs.history`), newest first as the admin shows it, each
entry's traceback in full. Tracebacks are printed by default: `show` is how
an operator without the admin reads why a job failed, the record is bounded
(`history.MAX_ENTRIES` entries of at most `history.TRACEBACK_CHARS`), and
the record comes last, after every field, so a pager's first screen is the
job itself.

Every text a row holds is `terminal_safe`; a traceback's own newlines are its
structure, so it is split on them first and each line escaped and indented,
and no line of it reads as a field.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs.cli import arguments, verb
from jobs.cli.ids import one_job
from jobs.cli.text import Write, terminal_safe
from jobs.cli.verb import ID_HELP, OK, Options, Verbs
from jobs.history import Entry, Outcome
from jobs.history_actions import is_action
from jobs.holding import Holders
from jobs.job_ids import IdPrefix
from jobs.models import Job, State
from jobs.presentation import attempts_not_done, indented_json, relative, took
from jobs.registry import registry
from jobs.waiting import Hold, Holds, dependencies, describe

#: Shown for an empty value.
NONE = "-"


#: show's help, as `--help` shows it.
HELP = (
    "Every field of one job, the payload as JSON, last_error in full, who holds it, "
    "and its attempt history (newest first, tracebacks in full)."
)


def add_parser(verbs: Verbs) -> None:
    """`show`'s id, and JSON for scripts."""
    show = verb.add(verbs, "show", HELP, handle)
    show.add_argument("id", type=arguments.job_id, metavar="ID", help=ID_HELP)
    verb.json_argument(show, "the job", "every field, errors as its entries")


def handle(write: Write, options: Options) -> int:
    """`show`'s options, to `show_job`."""
    return show_job(write, options["id"], as_json=options["json"], using=options["database"])


def show_job(
    write: Write,
    ident: uuid.UUID | IdPrefix,
    *,
    as_json: bool = False,
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Every field of one job, each on its line, then its attempt history; or,
    `as_json`, the same as one JSON object."""
    job = one_job(ident, using=using)
    now = timezone.now()
    holders = Holders.read(using, now)
    holds = Holds.read(using, now).of(job, stuck=holders.stuck(job))
    if (waits := dependencies(job, using, now)) is not None:
        holds.append(waits)
    lines = json_lines(job, holders, holds) if as_json else job_lines(job, holders, now, holds)
    for line in lines:
        write(line)
    return OK


def job_lines(
    job: Job, holders: Holders, now: datetime, holds: list[Hold] | None = None
) -> list[str]:
    """The fields, each on its line, the payload (as indented JSON) and `last_error`
    (in full) as blocks whose lines are indented; what it waits for
    (`jobs.waiting`, given `holds`); then the attempt history."""
    fields = [field.name for field in Job._meta.concrete_fields]
    width = max(len(name) for name in fields) + 1
    lines = []
    for name in fields:
        label = f"{name}:".ljust(width)
        lines += _field(label, name, getattr(job, name), job, holders, now)
    handled = "registered in this project" if registry.get(job.kind) else "none in this project"
    lines.append(f"{'handler:'.ljust(width)} {handled}")
    if holds is not None:
        lines.append(f"{'waiting:'.ljust(width)} {terminal_safe(describe(holds, job))}")
    return lines + history_lines(job)


def _field(
    label: str, name: str, value: object, job: Job, holders: Holders, now: datetime
) -> list[str]:
    if name == "payload":
        # JSON escapes a newline inside a string: each "\n" left ends a line.
        return [label, *_block(indented_json(value), "  ")] if value else [f"{label} {{}}"]
    if name == "last_error":
        return [label, *_block(str(value), "  ")] if value else [f"{label} (none)"]
    if name == "errors":
        return [f"{label} {'the attempt history, below' if value else '(none)'}"]
    if name == "claimed_by":
        return [f"{label} {holder(job, holders)}"]
    if name == "workflow_id" and value is not None:
        return [f"{label} {value} (its steps: jobs workflow show {str(value)[:8]})"]
    if name == "run_at" and job.state == State.WAITING:
        return [f"{label} {NONE} (not due while it waits: see waiting, below)"]
    if isinstance(value, datetime):
        return [f"{label} {value.isoformat()} ({relative(value, now)})"]
    if value is None:
        return [f"{label} {NONE}"]
    return [f"{label} {terminal_safe(str(value))}"]


def holder(job: Job, holders: Holders) -> str:
    """The runner that claimed the job, and, for a running job nobody is working
    on, why: "host:123 (runner gone)"."""
    if not job.claimed_by:
        return NONE
    stuck = holders.stuck(job)
    name = terminal_safe(job.claimed_by)
    return f"{name} ({stuck})" if stuck else name


def history_lines(job: Job) -> list[str]:
    """The attempt record: how many attempts did not end done, then each kept
    entry, newest first."""
    entries = job.attempt_history
    if not entries:
        return []
    heading = attempts_not_done(job.error_count, len(entries))
    lines = [f"Attempt history: {heading}; newest first:"]
    for entry in reversed(entries):
        lines += entry_lines(entry)
    return lines


def entry_lines(entry: Entry) -> list[str]:
    """One entry: its number, attempt and outcome, then its fields, indented;
    an operator's action (`jobs.history_actions`) says when and who."""
    attempt = "no attempt" if entry.attempt is None else f"attempt {entry.attempt}"
    outcome = terminal_safe(entry.outcome.replace("_", " ")) or NONE
    if is_action(entry):
        when = NONE if entry.ended_at is None else stamp(entry.ended_at)
        return [
            f"  #{entry.number}  {outcome}",
            f"    at:        {when}",
            f"    what:      {terminal_safe(entry.error) or NONE}",
        ]
    lines = [
        f"  #{entry.number}  {attempt}  {outcome}",
        f"    started:   {_when(entry)}",
        f"    runner:    {terminal_safe(entry.runner) or NONE}",
        f"    error:     {terminal_safe(entry.error) or NONE}",
        f"    exception: {terminal_safe(entry.exception_class_path)}",
    ]
    if entry.traceback.strip():
        lines += ["    traceback:", *_block(entry.traceback, "      ")]
    return lines


def stamp(moment: datetime) -> str:
    """An instant to the second in the site's time zone, as the admin shows it."""
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z}"


def _when(entry: Entry) -> str:
    """When an attempt started and how long it took (a reclaimed one: when its
    runner was last heard from, since its end is only when it was found)."""
    if entry.started_at is None:
        return NONE if entry.ended_at is None else f"{NONE} (ended {stamp(entry.ended_at)})"
    if entry.ended_at is None:
        return stamp(entry.started_at)
    if entry.outcome == Outcome.RECLAIMED:
        heard = f"at {stamp(entry.heard_at)}" if entry.heard_at else "not known"
        return f"{stamp(entry.started_at)}, runner lost; last heartbeat {heard}"
    ran = took((entry.ended_at - entry.started_at).total_seconds())
    return f"{stamp(entry.started_at)}, took {ran}"


def _block(text: str, indent: str) -> list[str]:
    """`text`'s own lines, each escaped and indented, trailing blank lines dropped."""
    lines = text.rstrip().split("\n")
    return [f"{indent}{terminal_safe(line.removesuffix('\r'))}" for line in lines]


def json_lines(job: Job, holders: Holders, holds: list[Hold] | None = None) -> list[str]:
    """The job as JSON: every field, `errors` as the entries (`Entry.as_json`),
    oldest first, with `error_count`, and `stuck` ("runner gone", "lease
    expired" or "") for its holder, and `waiting`: what holds it back, each
    hold's reason and detail (`jobs.waiting`), [] when nothing does; a waiting
    step's `run_at` is null, its row's parked date being no time to show."""
    data = {field.name: getattr(job, field.name) for field in Job._meta.concrete_fields}
    data["errors"] = [entry.as_json() for entry in job.attempt_history]
    data["error_count"] = job.error_count
    data["stuck"] = holders.stuck(job)
    data["waiting"] = [{"reason": h.reason, "detail": h.detail} for h in holds or ()]
    if job.state == State.WAITING:
        data["run_at"] = None  # parked past every due row: not a time to show
    # JSON escapes every control character in a string: each "\n" left ends a line.
    text = json.dumps(data, cls=DjangoJSONEncoder, indent=2, sort_keys=True)
    return text.split("\n")
