"""The queue in words: how an error, a duration, a moment and a job's next run
are said, once, for every screen that says them.

The admin, `manage.py jobs` and the runner's log lines all show the same few
facts about a job; written in each (as they were, four times over for an
error's telling line), a fix to one would miss the others. Each wording
lives here once. Where two screens say a thing differently on purpose, one function
takes the difference as a parameter: `glance=True` is the admin's list and
dashboard, read across a table in a second ("3 min", "overdue 2 h"); the
default is the shell's, which has room for two units ("4m 10s", "runs in 5m").

Pure functions of their arguments: no database, no clock (`now` is passed
in), no HTML (the admin escapes and marks up what it gets), and no import
from the rest of `jobs`, so that any module, `jobs.log` included, can use it
without a cycle.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Protocol

#: Shown where a value does not apply (a settled job's next run in the admin).
NOTHING = "—"

#: The states `next_run` tells apart: `jobs.models.State.QUEUED` and `RUNNING`,
#: spelt out rather than imported so that this module stays a leaf.
QUEUED = "queued"
RUNNING = "running"

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


def telling_line(text: str, *, trim: bool = True) -> str:
    """The line of an error that says what happened; "" for an empty error.

    A reason's first line; for a traceback (an exception escaping `run`) its
    last, the exception itself, since "Traceback (most recent call last):"
    says nothing. Blank lines are skipped. With `trim` the line loses its own
    leading and trailing spaces (the admin and the shell); without, it is kept
    as written (the runner's log lines, and `jobs.log.first_line`).
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line.strip() if trim else line


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
    expired. Settled: when it finished; at a glance nothing (`NOTHING`), as
    a settled job has no next run.
    """
    if job.state == QUEUED:
        wait = (job.run_at - now).total_seconds()
        if not glance:
            return f"{'runs' if wait > 0 else 'due'} {relative(job.run_at, now)}"
        if wait >= 1:
            return relative(job.run_at, now, glance=True)
        return "due now" if wait > -1 else f"overdue {duration(wait, glance=True)}"
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
