"""Which jobs a bulk action is for (`jobs.bulk`): the operator's filter, read from
the command line's options or the admin's list, and the selection it makes.

A filter is what SQL can say (kind, state, queue, how recently the state
changed, text in the error); a `Selection` adds, where SQL cannot say it all,
a test of each row's `last_error` in Python (a dead-letter group's line).
Pure but for `Filter.jobs`, which builds a queryset and runs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet

from jobs.models import Job

#: How far back `since` may reach: ten years, as `jobs enqueue --delay` goes.
SINCE_MAX = timedelta(days=3650)

_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str) -> timedelta:
    """A look-back such as `90s`, `30m`, `2h`, `1.5d` or `1w`; ValueError saying
    what is wanted for anything else, or for nothing or more than ten years."""
    found = _SINCE.match(text)
    if found is None:
        raise ValueError(
            f"must be a number and a unit, s, m, h, d or w (such as 30m or 2h), not {text[:40]!r}"
        )
    since = timedelta(seconds=float(found[1]) * _UNITS[found[2]])
    if not timedelta(0) < since <= SINCE_MAX:
        raise ValueError(f"must be more than nothing and at most ten years, not {text!r}")
    return since


@dataclass(frozen=True)
class Filter:
    """Which jobs a bulk action is for; the empty parts do not narrow."""

    kinds: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    #: Only rows that last changed state (queued, claimed, retried, settled:
    #: their `updated_at`) within this long before the count.
    since: timedelta | None = None
    #: Only rows whose `last_error` holds this text, in any case.
    error_contains: str = ""

    def jobs(self, using: str, now: datetime) -> QuerySet[Job]:
        """The rows this filter matches, as of `now`."""
        jobs = Job.objects.using(using).all()
        if self.kinds:
            jobs = jobs.filter(kind__in=self.kinds)
        if self.states:
            jobs = jobs.filter(state__in=self.states)
        if self.queues:
            jobs = jobs.filter(queue__in=self.queues)
        if self.since is not None:
            jobs = jobs.filter(updated_at__gte=now - self.since)
        if self.error_contains:
            jobs = jobs.filter(last_error__icontains=self.error_contains)
        return jobs

    def __str__(self) -> str:
        parts = []
        for name, values in (("kind", self.kinds), ("state", self.states), ("queue", self.queues)):
            if values:
                parts.append(f"{name} {' or '.join(values)}")
        if self.since is not None:
            parts.append(f"changed in the last {_said(self.since)}")
        if self.error_contains:
            parts.append(f"error containing {self.error_contains!r}")
        return ", ".join(parts) or "every job"


def _said(since: timedelta) -> str:
    seconds = since.total_seconds()
    for unit, size in reversed(_UNITS.items()):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class Selection:
    """The rows an action is for: a queryset, and where SQL cannot say all of
    it, a test of each row's `last_error` made in Python (a dead-letter
    group's telling line, `jobs.dead_letters`)."""

    jobs: QuerySet[Job]
    #: What the selection is, in words, for the confirmation and the log.
    said: str = ""
    check: Callable[[str], bool] | None = None
