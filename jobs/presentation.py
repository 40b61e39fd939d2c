"""The queue in words: how an error, a duration, a moment and a job's next run
are said, once, for every screen that says them.

The admin, `manage.py jobs` and the runner's log lines all show the same few
facts about a job; written in each (as they were, four times over for an
error's telling line, twice for escaping what a terminal would obey), a fix
to one would miss the others. Each wording lives here once. Where two
screens say a thing differently on purpose, one function takes the
difference as a parameter: `glance=True` is the admin's list and
dashboard, read across a table in a second ("3 min", "overdue 2 h"); the
default is the shell's, which has room for two units ("4m 10s", "runs in 5m").

Pure functions of their arguments: no database, no clock (`now` is passed
in), no HTML (the admin escapes and marks up what it gets), and no import
from the rest of `jobs`, so that any module, `jobs.log` included, can use it
without a cycle.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from typing import Protocol

#: Shown where a value does not apply (a settled job's next run in the admin).
NOTHING = "—"

#: The states `next_run` tells apart: `jobs.models.State.QUEUED` and `RUNNING`,
#: spelt out rather than imported so that this module stays a leaf.
QUEUED = "queued"
RUNNING = "running"
WAITING = "waiting"

#: Units from the largest down: seconds in one, the shell's name, the glance's name.
UNITS = ((86400, "d", "d"), (3600, "h", "h"), (60, "m", "min"), (1, "s", "s"))


class Scheduled(Protocol):
    """What `next_run` reads of a job (a `jobs.models.Job` has it all)."""

    @property
    def state(self) -> str: ...

    @property
    def run_at(self) -> datetime: ...

    @property
    def lease_expires_at(self) -> datetime | None: ...

    @property
    def finished_at(self) -> datetime | None: ...


#: The line a traceback opens with (`traceback.format_exception`), and an exception group's.
TRACEBACK = "Traceback (most recent call last):"
GROUP_TRACEBACK = "+ Exception Group " + TRACEBACK

#: The lines between chained tracebacks: a traceback after one of them is the
#: next exception's; one anywhere else is text its message quotes.
CHAINED = frozenset(
    (
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
    )
)


def telling_line(text: str, *, trim: bool = True) -> str:
    """The line of an error that says what happened; "" for an empty error.

    A reason's first line; for a traceback (an exception escaping `run`) the
    exception itself, since "Traceback (most recent call last):" says
    nothing: the first line of the last exception raised (`RuntimeError:
    boom`), not a later line of its message or a note. A traceback after a
    reason on its first line (`gave up after 3 of 3 attempts: Traceback
    ...`, as rows retired before the line was kept alone hold it) keeps the
    reason before the exception's line. Blank lines are skipped. With `trim`
    the line loses its own leading and trailing spaces (the admin and the
    shell); without, it is kept as written (the runner's log lines, and
    `jobs.log.first_line`).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0].lstrip()
    if not first.endswith(TRACEBACK):
        line = first if len(lines) > 1 else first.rstrip()
    else:
        line = _raised(first, lines[1:]) or lines[-1].rstrip()
    return line.strip() if trim else line


def _raised(first: str, rest: list[str]) -> str:
    """The line naming the exception a traceback ends with, after what its
    `first` line says before the heading (a retirement's reason, in old
    rows); "" when none sits at the margin.

    That line is the first at the margin after the last chained traceback's
    heading: frames are indented below it, and a message's further lines and
    notes follow it. An exception group is drawn inside a margin of "  | ",
    and is named by its own line.
    """
    group = first.endswith(GROUP_TRACEBACK)
    prefix = first.removesuffix(GROUP_TRACEBACK if group else TRACEBACK).rstrip()
    start, margin = 0, "  | " if group else ""
    for index, line in enumerate(rest):
        if index and rest[index - 1] in CHAINED:
            if line == TRACEBACK:
                start, margin = index + 1, ""
            elif line == "  " + GROUP_TRACEBACK:
                start, margin = index + 1, "  | "
    for line in rest[start:]:
        if line.startswith(margin) and not line[len(margin) : len(margin) + 1].isspace():
            raised = line[len(margin) :]
            return f"{prefix} {raised}" if prefix else raised
    return ""


#: The Unicode categories `terminal_safe` escapes: controls (newline, tab and
#: escape among them), format characters (a right-to-left override), lone
#: surrogates (which no terminal encoding can write) and the line and
#: paragraph separators.
UNSAFE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def terminal_safe(text: str) -> str:
    """`text` on one line, with every character a terminal would obey written as its escape.

    Kinds, keys, payloads and errors come from callers, handlers and upstream
    services; printed raw, an escape sequence in one (`\\x1b[2J`, a carriage
    return, a right-to-left override) would be obeyed by the operator's
    terminal instead of shown, and a newline would start a line that reads
    as another job's row or log line. Printable text, in any script, is kept
    as written. The one escaping of `manage.py jobs` and of the log lines
    (`jobs.log`), which write it on the runner's path: text with nothing to
    escape, nearly all of it, is returned after one pass in C
    (`str.isprintable`, false for every category escaped here).
    """
    if text.isprintable():
        return text
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in UNSAFE
        else char
        for char in text
    )


def duration(seconds: float, *, glance: bool = False) -> str:
    """A length of time, its sign ignored.

    By default to the unit that matters and the one below it, rounded:
    "45s", "4m 10s", "3h 5m", "2d 4h". At a `glance` the largest whole unit
    alone, cut down, spaced: "45 s", "4 min", "3 h", "2 d".
    """
    whole = int(abs(seconds)) if glance else round(abs(seconds))
    index = next((i for i, unit in enumerate(UNITS) if whole >= unit[0]), len(UNITS) - 1)
    size, name, glance_name = UNITS[index]
    count, rest = divmod(whole, size)
    if glance:
        return f"{count} {glance_name}"
    if size == 1:
        return f"{count}{name}"
    smaller, smaller_name, _ = UNITS[index + 1]
    part = rest // smaller
    return f"{count}{name} {part}{smaller_name}" if part else f"{count}{name}"


def took(seconds: float) -> str:
    """How long an attempt ran: in milliseconds under a second ("340 ms", where
    `duration` would say "0s" for every quick attempt), else as `duration` says."""
    if abs(seconds) < 1:
        return f"{round(abs(seconds) * 1000)} ms"
    return duration(seconds)


def relative(moment: datetime, now: datetime, *, glance: bool = False) -> str:
    """`moment` seen from `now`: "in 4m 10s", "3h ago".

    By default within a second either way is "now"; at a `glance` there is no
    "now": the present reads "0 s ago".
    """
    seconds = (moment - now).total_seconds()
    if not glance and abs(seconds) < 1:
        return "now"
    spoken = duration(seconds, glance=glance)
    return f"in {spoken}" if seconds > 0 else f"{spoken} ago"


def next_run(job: Scheduled, now: datetime, *, glance: bool = False) -> str:
    """The moment that matters for a job in its state, in words, relative to `now`.

    Queued: when it runs ("runs in 5m", "due 3m ago"; at a glance "in 5 min",
    "due now", "overdue 2 h"). Running: when its lease ends or that it has
    expired. Waiting (a workflow's step): after its dependencies, never its
    parked run_at. Settled: when it finished; at a glance nothing
    (`NOTHING`), as a settled job has no next run.
    """
    if job.state == QUEUED:
        wait = (job.run_at - now).total_seconds()
        if not glance:
            return f"{'runs' if wait > 0 else 'due'} {relative(job.run_at, now)}"
        if wait >= 1:
            return relative(job.run_at, now, glance=True)
        return "due now" if wait > -1 else f"overdue {duration(wait, glance=True)}"
    if job.state == WAITING:  # its run_at is parked past every due row until released
        return "after its dependencies"
    if job.state == RUNNING:
        lease = job.lease_expires_at
        if lease is None:
            return "running now" if glance else "running"
        verb = "lease ends" if lease > now else "lease expired"
        return f"{verb} {relative(lease, now, glance=glance)}"
    if glance:
        return NOTHING
    if job.finished_at is not None:
        return f"finished {relative(job.finished_at, now)}"
    return f"run_at {job.run_at.isoformat()}"


def late(job: Scheduled, now: datetime) -> bool:
    """Whether a live job has missed its moment: queued and a second or more
    overdue, or running on a lease that has run out (its runner likely gone)."""
    if job.state == QUEUED:
        return (job.run_at - now).total_seconds() <= -1
    if job.state == RUNNING and job.lease_expires_at is not None:
        return job.lease_expires_at <= now
    return False


def indented_json(value: object) -> str:
    """A payload or result as JSON for reading: indented, keys sorted, any script as written."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def attempts_not_done(count: int, kept: int) -> str:
    """The attempt record's heading: how many attempts did not end done, and,
    when older entries were dropped, how many of them are kept."""
    said = "1 attempt did not end done" if count == 1 else f"{count} attempts did not end done"
    return said if count <= kept else f"{said}; the last {kept} are kept"


def cancelling_running(running: int, hard_kill_after: int, *, done: bool = False) -> str:
    """What cancelling `running` running jobs does to their handlers and runners,
    as every cancel's confirmation (the admin's pages, `jobs cancel`) says it,
    with `hard_kill_after` as now set; "" when none runs. `done` after the
    cancel ("was running"), else before it ("is running").

    A cancel retires the row and fences the attempt's settle out; it cannot
    reach into the thread running the handler (`jobs.runner.watch`), so an
    operator cancelling a hung job must know the process restart, not the
    cancel, is what ends it.
    """
    if not running:
        return ""
    verb = ("was", "were") if done else ("is", "are")
    if hard_kill_after:
        hung = (
            f"A hung synchronous handler ends only with its process: {hard_kill_after} s "
            "past its budget (hard_kill_after), its runner stops claiming, lets its other "
            "jobs finish within --grace (handing back the rest) and exits, to be restarted "
            "by runjobs --processes or your process manager."
        )
    else:
        hung = (
            "A hung synchronous handler ends only with its process, and hard_kill_after is 0: "
            "its runner never restarts itself, and the handler keeps its thread and "
            "database connection until the process is restarted."
        )
    return (
        f"{running:,} of them {verb[running != 1]} running. Cancelling does not stop a "
        "running handler: an async one is stopped at its budget, a synchronous one runs on "
        f"until it returns, and what either returns is discarded. {hung}"
    )
