"""Dead letters: the retired jobs (failed, cancelled), grouped by kind and by the
line of their error that tells what went wrong, and redriven a group at a time.

After an incident the operator's question is not "which 40,000 jobs failed"
but "which few things went wrong, to how many jobs, since when": a group per
kind and telling line, with its count and first and last `finished_at`. The
database groups by the exact `last_error` (by its MD5, since MariaDB compares
only the first `max_sort_length` bytes of a text when grouping), and the
groups are merged here by `error_line`, so rows of older releases, whose
`last_error` held a whole traceback, land in the same group as today's
one-line reasons. Redrive (`redrive`) retries a group through the bulk
machinery (`jobs.bulk`), counted, confirmed and batched like any bulk retry,
with an optional new attempt budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q
from django.db.models.functions import MD5

from jobs import bulk
from jobs.models import Job, State
from jobs.presentation import telling_line

#: The states of a dead letter: retired, and not by finishing.
RETIRED = (State.FAILED, State.CANCELLED)

#: What a retirement puts before the error when the attempts ran out
#: (`jobs.backoff.next_attempt`): left out of the group's line, so that jobs
#: with budgets of 3 and of 5 that died of the same error are one group.
_GAVE_UP = re.compile(r"^\s*gave up after \d+ of \d+ attempts?: ?")

#: The longest line a group is shown with and can be named by.
LINE_MAX = 1_000


def error_line(last_error: str) -> str:
    """The line a retired job is grouped by: the telling line of its error
    (`jobs.presentation.telling_line`), without the "gave up after N of N
    attempts: " a retirement puts first, whether the rest is one line or (in
    rows written before it was one line) a whole traceback."""
    return telling_line(_GAVE_UP.sub("", last_error, count=1))[:LINE_MAX]


@dataclass
class Group:
    """Retired jobs of one kind with one telling line."""

    kind: str
    line: str
    count: int
    failed: int
    cancelled: int
    first_seen: datetime | None
    last_seen: datetime | None

    def merge(self, other: Group) -> None:
        self.count += other.count
        self.failed += other.failed
        self.cancelled += other.cancelled
        self.first_seen = _earlier(self.first_seen, other.first_seen)
        self.last_seen = _later(self.last_seen, other.last_seen)


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def groups(*, kinds: tuple[str, ...] = (), using: str = "default") -> list[Group]:
    """The dead-letter groups, most jobs first (then the most recent last seen),
    of `kinds` or of every kind."""
    rows = Job.objects.using(using).filter(state__in=RETIRED)
    if kinds:
        rows = rows.filter(kind__in=kinds)
    found = (
        rows.annotate(error_hash=MD5("last_error"))
        .values("kind", "error_hash")
        .annotate(
            error=Min("last_error"),
            count=Count("id"),
            failed=Count("id", filter=Q(state=State.FAILED)),
            first=Min("finished_at"),
            last=Max("finished_at"),
        )
        .order_by()
    )
    merged: dict[tuple[str, str], Group] = {}
    for row in found:
        group = Group(
            kind=row["kind"],
            line=error_line(row["error"] or ""),
            count=row["count"],
            failed=row["failed"],
            cancelled=row["count"] - row["failed"],
            first_seen=row["first"],
            last_seen=row["last"],
        )
        key = (group.kind, group.line)
        if key in merged:
            merged[key].merge(group)
        else:
            merged[key] = group
    return sorted(merged.values(), key=_order)


def _order(group: Group) -> tuple[int, float, str, str]:
    last = group.last_seen.timestamp() if group.last_seen else 0.0
    return (-group.count, -last, group.kind, group.line)


def selection(kind: str, line: str, using: str = "default") -> bulk.Selection:
    """The retired jobs of `kind` whose error's line (`error_line`) is `line`.

    The database narrows to rows whose `last_error` holds the line (any row of
    the group does, the line being one of its lines); each row is then tested
    here, as the grouping does, so a row that only mentions it is left out.
    """
    jobs = Job.objects.using(using).filter(kind=kind, state__in=RETIRED, last_error__contains=line)
    return bulk.Selection(
        jobs, said=f"kind {kind}, error {line!r}", check=lambda error: error_line(error) == line
    )
