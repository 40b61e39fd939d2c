"""The attempt record: what each attempt that did not end `Done` did, kept on its row.

`Job.errors` holds one entry per such attempt (a retry, a failure, a timeout,
a reclaim after its runner vanished, a cancel), oldest first, as JSON: the
attempt's number, when it started and ended, the runner that ran it, the
outcome, the error's telling line and, for an exception, its class path and
traceback. A `Done` attempt writes nothing here: the runner's hot path pays
nothing for the record. An operator's Retry and Run now add an entry too,
saying who and when (`jobs.history_actions`).

Bounded twice, so a job that fails forever cannot grow its row without end:
the list keeps the last `MAX_ENTRIES` entries (each carries its `number`
among all the job's entries, so the last one's number counts them all), and
each entry's texts are cut in the middle past `ERROR_CHARS` and
`TRACEBACK_CHARS` (the end of a traceback says what was raised, its start
where). The worst row holds about 20 x 9,000 characters.

The list is read with the claim, and an entry written by the attempt's own
fenced settle (`jobs.store.orm.OrmStore`): no extra statement, and no SQL
per database. Entries are read tolerantly (`entries`), since the column can
be edited by hand.

The exception classes here stand for the ends no exception of the handler's
describes (a timeout, a reclaim, a cancel, a release, a row retired without
running, a returned `Retry` or `Failed`, an outcome refused): `django.tasks`
results name them as `TaskError.exception_class_path`, and they import.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils.dateparse import parse_datetime

from jobs.presentation import telling_line
from jobs.storable import storable_text

if TYPE_CHECKING:
    from jobs.models import Job

#: How many entries a row keeps: the newest.
MAX_ENTRIES = 20
#: The longest error line an entry keeps.
ERROR_CHARS = 1_000
#: The longest traceback an entry keeps.
TRACEBACK_CHARS = 8_000


class Outcome(enum.StrEnum):
    """How an attempt ended: the one vocabulary of the attempt record, the
    `job_finished` signal (`jobs.signals.OUTCOMES`), the metrics' `outcome`
    label and the attempt's span. Each member is its string, so receivers
    and dashboards that compare with "done" or "failed" keep working.

    The record keeps an entry for every end but `DONE`; `RECLAIMED` is
    recorded only, never told as a `job_finished` (a lost attempt's end is
    learnt by the runner that takes its row)."""

    #: Returned `Done`: the row settled `done`.
    DONE = "done"
    #: Raised or returned `Retry`: another attempt is scheduled.
    RETRY = "retry"
    #: The job was retired with this attempt (`Failed`, a last `Retry`, a
    #: deadline, a row that could not run).
    FAILED = "failed"
    #: Overran its budget; retried or retired, as the row's state says.
    TIMED_OUT = "timed_out"
    #: Its process died or vanished: found with an expired lease, never
    #: settled, and taken over.
    RECLAIMED = "reclaimed"
    #: An operator cancelled the job while this attempt ran (or before the
    #: next one started: then the entry has no attempt number).
    CANCELLED = "cancelled"
    #: Handed back unfinished by its runner (a runner stopping before its
    #: attempts end), for another to run.
    RELEASED = "released"


class AttemptError(Exception):
    """An attempt's end that no exception of the handler's describes."""


class AttemptFailed(AttemptError):
    """The handler returned `Retry` or `Failed` without raising."""


class AttemptTimedOut(AttemptError):
    """The attempt overran its budget."""


class AttemptReclaimed(AttemptError):
    """The attempt's process died or vanished; its lease expired and another runner took the job."""


class AttemptReleased(AttemptError):
    """The attempt's runner handed the job back unfinished."""


class JobCancelled(AttemptError):
    """An operator cancelled the job."""


class OutcomeRefused(AttemptError):
    """The handler returned an outcome the runner cannot carry out: a `Done`
    whose result no database stores, a `Reschedule` whose delay is not a
    positive timedelta (`jobs.runner.outcomes`)."""


class JobNotRun(AttemptError):
    """The job was retired without running (its deadline passed, its attempts
    ran out, or its row could not be used)."""


def class_path(kind: type[BaseException]) -> str:
    """A class's importable path, as Django's `TaskError` names it."""
    return f"{kind.__module__}.{kind.__qualname__}"


#: The class an entry without an exception of its own stands for.
_STANDS_FOR = {
    Outcome.RETRY: AttemptFailed,
    Outcome.FAILED: AttemptFailed,
    Outcome.TIMED_OUT: AttemptTimedOut,
    Outcome.RECLAIMED: AttemptReclaimed,
    Outcome.RELEASED: AttemptReleased,
    Outcome.CANCELLED: JobCancelled,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One attempt that did not end `Done`, as the row keeps it."""

    #: Its place among all the job's entries, from 1 (set when appended).
    number: int
    #: The attempt's number, as `Job.attempts` counted it at claim; None for
    #: a cancel while no attempt ran.
    attempt: int | None
    started_at: datetime | None
    ended_at: datetime | None
    #: The runner's name, as the runners page shows it; "" when unknown.
    runner: str
    outcome: str
    #: What happened, in a line.
    error: str
    #: The exception's class path; "" when nothing was raised.
    exception: str = ""
    traceback: str = ""
    #: For a reclaimed attempt: when its runner last reported itself, if known.
    heard_at: datetime | None = None

    @property
    def exception_class_path(self) -> str:
        """The exception's class path, or the class of ours this end stands for."""
        if self.exception:
            return self.exception
        return class_path(_STANDS_FOR.get(self.outcome, AttemptFailed))  # type: ignore[call-overload]

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "attempt": self.attempt,
            "started_at": None if self.started_at is None else self.started_at.isoformat(),
            "ended_at": None if self.ended_at is None else self.ended_at.isoformat(),
            "runner": self.runner,
            "outcome": self.outcome,
            "error": self.error,
            "exception": self.exception,
            "traceback": self.traceback,
            **({"heard_at": self.heard_at.isoformat()} if self.heard_at else {}),
        }


def record(
    *,
    attempt: int | None,
    started_at: datetime | None,
    ended_at: datetime,
    runner: str | None,
    outcome: str,
    error: str,
    exception: BaseException | str | None = None,
    traceback: str = "",
    heard_at: datetime | None = None,
) -> Entry:
    """A new entry (numbered when appended), its texts bounded and storable
    (`jobs.storable.storable_text`: a NUL or a lone surrogate in an exception's
    message must not make the settle that records it fail)."""
    if isinstance(exception, BaseException):
        exception = class_path(type(exception))
    return Entry(
        number=0,
        attempt=attempt,
        started_at=started_at,
        ended_at=ended_at,
        runner=storable_text(runner or ""),
        outcome=str(outcome),
        error=bounded(storable_text(error), ERROR_CHARS),
        exception=storable_text(str(exception or "")),
        traceback=bounded(storable_text(traceback), TRACEBACK_CHARS),
        heard_at=heard_at,
    )


def for_attempt(
    job: Job,
    outcome: Outcome,
    reason: str,
    exception: BaseException | None,
    now: datetime,
    prefix: str = "",
) -> Entry:
    """The entry for `job`'s current attempt, ended at `now` with `outcome`.

    `reason` is the traceback when `exception` was raised in the handler
    (ours, the `AttemptError`s, carry none); the entry's error is its telling
    line, after `prefix`. The entry's traceback is that traceback, or a
    reason of several lines in full: a retired row keeps its telling line
    alone (`jobs.retirement.told`), so the record is where the rest is read.
    """
    line = telling_line(reason)
    raised = exception is not None and not isinstance(exception, AttemptError)
    return record(
        attempt=job.attempts,
        started_at=job.started_at,
        ended_at=now,
        runner=job.claimed_by,
        outcome=outcome,
        error=f"{prefix}: {line}" if prefix else line,
        exception=exception,
        traceback=reason if raised or "\n" in reason.strip() else "",
    )


def lost_attempt(
    job: Job,
    runner: str | None,
    started_at: datetime | None,
    now: datetime,
    heard_at: datetime | None = None,
) -> Entry:
    """The entry for the attempt before `job`'s current one, found at `now` with
    its lease expired and never settled: written when the row is reclaimed.

    Its process died or vanished: killed (SIGKILL, the OOM killer), crashed
    (a segfault, a handler's `os._exit`), its machine lost, or stopped
    (SIGSTOP) for longer than its lease. `heard_at` is its runner's last
    heartbeat, where its row was still there to say: the attempt ran until
    some time after it, not until `now`.
    """
    number = job.attempts - 1
    where = f" on runner {runner}" if runner else ""
    return record(
        attempt=number,
        started_at=started_at,
        ended_at=now,
        runner=runner,
        outcome=Outcome.RECLAIMED,
        error=(
            f"the process running attempt {number} died or vanished: "
            f"its lease expired{where} and the attempt never settled"
        ),
        heard_at=heard_at,
    )


def exhausted(job: Job) -> str:
    """Why `job`, claimed past its attempt budget, is retired without running:
    its last attempt never settled. Said from its record: how many of its last
    attempts in a row ended with their process dying, and the last one's runner.

    An attempt that never settled has a `RECLAIMED` entry (`lost_attempt`),
    or none at all when the process taking it over died before noting it;
    every other end of an attempt writes an entry of its own, and `Done`
    ends the job.
    """
    ran = job.attempts - 1
    newest = {entry.attempt: entry for entry in entries(job.errors) if entry.attempt is not None}
    died = 0
    while died < ran and newest.get(ran - died, _LOST).outcome == Outcome.RECLAIMED:
        died += 1
    if died == 0:
        return (
            f"attempts exhausted: claim {job.attempts} of a budget of {job.max_attempts}; "
            "the last attempt never settled (its process died or vanished)"
        )
    runner = newest.get(ran, _LOST).runner
    where = f"on runner {runner}" if runner else "runner unknown"
    last = f"the last {where}" if ran > 1 and runner else where
    if died == ran:
        budget = min(ran, job.max_attempts)
        past = ran - budget  # claims that found it spent, gone with their process (another job's)
        more = f", and {past} claim{'s' if past > 1 else ''} past its budget too" if past else ""
        every = (
            "its one attempt ended with its process dying before it settled"
            if budget == 1
            else f"all {budget} of its attempts ended with their process dying before they settled"
        )
        return f"attempts exhausted: {every}{more} ({last})"
    which = "its last attempt" if died == 1 else f"its last {died} attempts"
    return (
        f"attempts exhausted: {which} (of {ran}, a budget of {job.max_attempts}) ended "
        f"with their process dying before they settled ({last})"
    )


#: An attempt missing from the record: it never settled.
_LOST = Entry(0, None, None, None, "", Outcome.RECLAIMED, "")


def appended(stored: Any, entry: Entry) -> list[dict[str, Any]]:
    """The list to store after `entry`: what `stored` holds, then `entry`,
    numbered after the last, the oldest dropped past `MAX_ENTRIES`."""
    kept = [item for item in (stored if isinstance(stored, list) else []) if isinstance(item, dict)]
    numbered = Entry(**{**_fields(entry), "number": total(stored) + 1})
    return [*kept, numbered.as_json()][-MAX_ENTRIES:]


def entries(stored: Any) -> list[Entry]:
    """The entries `Job.errors` holds, oldest first; what does not read as one
    (written by hand) is skipped."""
    if not isinstance(stored, list):
        return []
    found = []
    for position, item in enumerate(stored, start=1):
        entry = _entry(item, position)
        if entry is not None:
            found.append(entry)
    return found


def total(stored: Any) -> int:
    """How many entries the job has had, the dropped ones included."""
    listed = entries(stored)
    if not listed:
        return 0
    return max(listed[-1].number, len(listed))


def bounded(text: str, limit: int) -> str:
    """`text`, or its start and end around a note of what was cut, within `limit`."""
    if len(text) <= limit:
        return text
    note = f"\n... ({len(text) - limit} characters cut) ...\n"
    head = (limit - len(note)) // 4
    tail = limit - len(note) - head
    return text[:head] + note + text[len(text) - tail :]


def _fields(entry: Entry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in Entry.__slots__}


def _entry(item: Any, position: int) -> Entry | None:
    if not isinstance(item, dict):
        return None
    number = item.get("number")
    attempt = item.get("attempt")
    return Entry(
        number=number if isinstance(number, int) and _is_int(number) else position,
        attempt=attempt if _is_int(attempt) else None,
        started_at=_moment(item.get("started_at")),
        ended_at=_moment(item.get("ended_at")),
        runner=_text(item.get("runner")),
        outcome=_text(item.get("outcome")),
        error=_text(item.get("error")),
        exception=_text(item.get("exception")),
        traceback=_text(item.get("traceback")),
        heard_at=_moment(item.get("heard_at")),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None


def runners(stored: Sequence[Entry]) -> list[str]:
    """The runner of each numbered attempt among `stored`, oldest first."""
    return [entry.runner for entry in stored if entry.attempt is not None]
