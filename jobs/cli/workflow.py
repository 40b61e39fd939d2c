"""`manage.py jobs workflow show|cancel ID`: one workflow at a shell, as its
admin page shows it, and its cancel.

What a workflow is and how it is cancelled are `jobs.workflows.operator`'s,
shared with the admin; this module only words them. Each step is a row of a
table in the order the steps can run (dependencies first), then, indented
under it, its result's first line or its error's telling line and what it
waits for. A waiting step says how many of its dependencies it still waits
for, never its row's parked `run_at`.

An ID is the workflow's, or any of its steps' (a whole id, or 8 or more of
its first hex digits); one that names none, or several, is refused before
anything is read or written, with exit status 2, as an argument the operator
must change. `cancel` confirms as the bulk verbs do (`jobs.cli.by_filter`):
the number first, then `--yes` or a "y" at a terminal; refused in a script.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import fields
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs.cli import verb
from jobs.cli.by_filter import Ask, terminal_ask
from jobs.cli.text import Write, table, terminal_safe
from jobs.cli.verb import NOT_ALL_DONE, OK, Options, Verbs
from jobs.models import SETTLED_STATES, JobsConfig, State
from jobs.presentation import cancelling_running, relative, took
from jobs.workflows import operator
from jobs.workflows.cancelling import ALREADY_SETTLED
from jobs.workflows.operator import StepView, UnknownWorkflow, WorkflowView

#: workflow's help, as `--help` shows it.
HELP = "Show a workflow's steps and who waits on whom, or cancel every step not settled."

WORKFLOW_ID_HELP = (
    "A workflow's id, or one of its steps' job ids; or 8 or more of its first hex digits "
    "(hyphens ignored) if no other workflow's id begins with them."
)

#: Shown for an empty value, as `jobs show` does.
NONE = "-"

#: How many dependencies a step's "waits for" line names; the rest are counted.
NAMED = 10


def add_parser(verbs: Verbs) -> None:
    """`workflow show ID [--json]` and `workflow cancel ID [--yes] [--dry-run] [--by]`."""
    workflow = verb.subcommand(verbs, "workflow", HELP)
    actions = workflow.add_subparsers(dest="action", metavar="show|cancel", required=True)
    show = verb.add(
        actions,
        "show",
        "A workflow's name, deadline and steps per state, then each step in the order "
        "they can run: state, attempts, duration, queue, its result's first line or its "
        "error, and what it waits for. Exits 2 if ID names no workflow, or several.",
        handle_show,
    )
    show.add_argument("id", metavar="ID", help=WORKFLOW_ID_HELP)
    verb.json_argument(show, "the workflow", "every step, its dependencies by job id")
    cancel = verb.add(
        actions,
        "cancel",
        "Cancel every step of a workflow not settled (waiting, queued or running), each "
        "handler's abandon once, as `jobs cancel` cancels a job: a running handler is not "
        "stopped, its result is discarded. Says the number and asks first (--yes in a "
        "script). Exits 1 if a step could not be cancelled, 2 if ID names no workflow, or "
        "several.",
        handle_cancel,
    )
    cancel.add_argument("id", metavar="ID", help=WORKFLOW_ID_HELP)
    verb.by_argument(cancel, "Who cancelled, kept in each step's last_error")
    cancel.add_argument(
        "--dry-run", action="store_true", help="Count and print the steps; change nothing."
    )
    cancel.add_argument(
        "--yes",
        action="store_true",
        help="Cancel without asking (otherwise asked at a terminal, refused in a script).",
    )


def handle_show(write: Write, options: Options) -> int:
    """`workflow show`'s options, to `show_workflow`."""
    return show_workflow(write, options["id"], as_json=options["json"], using=options["database"])


def handle_cancel(write: Write, options: Options) -> int:
    """`workflow cancel`'s options, to `cancel_workflow`."""
    return cancel_workflow(
        write,
        options["id"],
        by=verb.by(options),
        yes=options["yes"],
        dry_run=options["dry_run"],
        using=options["database"],
    )


def found(text: str, using: str) -> WorkflowView:
    """The workflow `text` names (`operator.resolve`); `CommandError` with exit
    status 2 when none or several do, before anything is written."""
    try:
        view = operator.describe(operator.resolve(text, using=using), using=using)
    except UnknownWorkflow as error:
        raise CommandError(str(error), returncode=2) from None
    if view is None:  # swept between the two reads
        raise CommandError(f"No workflow has the id {terminal_safe(text)}.", returncode=2)
    return view


# -- show ------------------------------------------------------------------------


def show_workflow(
    write: Write, text: str, *, as_json: bool = False, using: str = DEFAULT_DB_ALIAS
) -> int:
    """The workflow `text` names as lines, or `as_json` as one JSON object."""
    view = found(text, using)
    lines = json_lines(view) if as_json else workflow_lines(view, timezone.now())
    for line in lines:
        write(line)
    return OK


def workflow_lines(view: WorkflowView, now: datetime) -> list[str]:
    """The workflow's fields, then a table of its steps, each row followed by
    its result or error and what it waits for, indented."""
    deadline = NONE if view.deadline is None else _when(view.deadline, now)
    lines = [
        f"workflow: {terminal_safe(view.name)}",
        f"id:       {view.id}",
        f"created:  {_when(view.created_at, now)}",
        f"deadline: {deadline}",
        f"steps:    {_counts(view)}",
        "",
    ]
    by_id = {step.job_id: step for step in view.steps}
    rows = [["STEP", "JOB", "STATE", "ATTEMPTS", "TOOK", "QUEUE", "WHEN"]]
    rows += [
        [
            step.name,
            str(step.job_id)[:8],
            step.state,
            f"{step.attempts}/{step.max_attempts}",
            NONE if step.duration is None else took(step.duration.total_seconds()),
            step.queue,
            _moment(step, now),
        ]
        for step in view.steps
    ]
    head, *rest = table(rows)
    lines.append(head)
    for step, row in zip(view.steps, rest, strict=True):
        lines.append(row)
        lines += [f"    {line}" for line in _details(step, by_id)]
    return lines


def _counts(view: WorkflowView) -> str:
    total = len(view.steps)
    said = ", ".join(f"{n} {state}" for state, n in view.counts.items())
    settled = "all settled" if view.settled else "not all settled"
    return f"{total} ({said}); {settled}" if total else "none"


def _when(moment: datetime, now: datetime) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z} ({relative(moment, now)})"


def _moment(step: StepView, now: datetime) -> str:
    """What matters now of a step, in words: how many dependencies a waiting
    one waits for, when a queued one is due, since when one runs, when a
    settled one finished."""
    if step.state == State.WAITING:
        total = len(step.outcome_by_dependency)
        return f"waiting for {step.unsettled_dependencies} of {total} dependencies"
    if step.state == State.QUEUED and step.run_at is not None:
        return f"{'runs' if step.run_at > now else 'due'} {relative(step.run_at, now)}"
    if step.state == State.RUNNING and step.started_at is not None:
        return f"running, started {relative(step.started_at, now)}"
    if step.finished_at is not None:
        return f"finished {relative(step.finished_at, now)}"
    return NONE


def _details(step: StepView, by_id: dict[uuid.UUID, StepView]) -> list[str]:
    """A step's result or error line, and what it waits for (each with its state)."""
    lines = []
    if step.result_line:
        lines.append(f"result:    {terminal_safe(step.result_line)}")
    if step.error_line:
        lines.append(f"error:     {terminal_safe(step.error_line)}")
    if step.waits_for:
        named = [_dependency(dep, step, by_id) for dep in step.waits_for[:NAMED]]
        if (more := len(step.waits_for) - NAMED) > 0:
            named.append(f"and {more} more")
        lines.append(f"waits for: {', '.join(named)}")
    return lines


def _dependency(dep: uuid.UUID, step: StepView, by_id: dict[uuid.UUID, StepView]) -> str:
    """A dependency by its name and its state now (its edge's outcome if its job is gone)."""
    other = by_id.get(dep)
    if other is None:
        outcome = step.outcome_by_dependency.get(dep)
        return f"{dep} ({outcome or 'gone'})"
    return f"{terminal_safe(other.name)} ({other.state})"


def json_lines(view: WorkflowView) -> list[str]:
    """The workflow as JSON: its fields, `settled`, `counts`, and each step's
    fields in run order (`duration` in seconds, dependencies by job id)."""
    data = {
        "id": view.id,
        "name": view.name,
        "deadline": view.deadline,
        "created_at": view.created_at,
        "settled": view.settled,
        "counts": view.counts,
        "steps": [step_data(step) for step in view.steps],
    }
    # JSON escapes every control character in a string: each "\n" left ends a line.
    return json.dumps(data, cls=DjangoJSONEncoder, indent=2).split("\n")


def step_data(step: StepView) -> dict[str, Any]:
    data = {f.name: getattr(step, f.name) for f in fields(step)}
    data["duration"] = None if step.duration is None else step.duration.total_seconds()
    data["outcome_by_dependency"] = {str(k): v for k, v in step.outcome_by_dependency.items()}
    return data


# -- cancel ----------------------------------------------------------------------


def cancel_workflow(
    write: Write,
    text: str,
    *,
    by: str,
    yes: bool = False,
    dry_run: bool = False,
    using: str = DEFAULT_DB_ALIAS,
    ask: Ask | None = None,
) -> int:
    """Say how many steps a cancel would retire, confirm, cancel, report."""
    view = found(text, using)
    live = {s: n for s, n in view.counts.items() if s not in SETTLED_STATES}
    count = sum(live.values())
    name = terminal_safe(view.name)
    if not count:
        write(f"Nothing to cancel: every step of workflow {name} ({view.id}) settled.")
        return OK
    said = ", ".join(f"{n} {state}" for state, n in live.items())
    settled = len(view.steps) - count
    write(
        f"Cancel {count} step{'' if count == 1 else 's'} of workflow {name} ({view.id}): {said}"
        + (f"; {settled} settled, left as they are." if settled else ".")
    )
    if running := live.get(State.RUNNING, 0):
        write(cancelling_running(running, JobsConfig.load(using).hard_kill_after))
    if dry_run:
        write("Dry run: nothing changed.")
        return OK
    if not yes and not (ask or terminal_ask)(f"Cancel these {count} steps? [y/N] "):
        write("Nothing changed (confirm with --yes, or y at the prompt).")
        return NOT_ALL_DONE
    report = operator.cancel(view.id, by=by, using=using)
    write(f"Cancelled: {report}.")
    if report.running:
        write(cancelling_running(report.running, JobsConfig.load(using).hard_kill_after, done=True))
    missed = sum(n for why, n in report.skipped.items() if not why.endswith(ALREADY_SETTLED))
    return NOT_ALL_DONE if missed else OK
