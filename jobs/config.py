"""The effective `[jobs]` config: the seed's seven keys, their defaults, and validation.

Read through `current()` on every pass of the runner and at every enqueue, so
this is the one place that decides what the queue is tuned to. Today the
values come from `settings.JOBS` (filled from `JOBS_*` variables); each key's
comment says at what grain a change takes effect.

There is deliberately no `enabled` key: the runner is how the project finishes
work it has already promised somebody, so switching it off would strand that
work rather than disable a feature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class JobsSettings:
    #: How often an idle runner looks for work nobody woke it for: backoffs
    #: coming due, periodic jobs. An enqueue in the runner's own process wakes
    #: it at once. Read on every pass of the loop.
    poll_interval_ms: int = 1_000
    #: How many attempts run at once in one runner. Eight keeps a restart after
    #: an upstream outage from becoming thousands of concurrent callers against
    #: one service, and still drains a backlog steadily. Read on every pass.
    max_concurrent: int = 8
    #: Attempts before a job is retired. Counted at claim, so a job that kills
    #: its process still spends one. Frozen onto each row at enqueue: a change
    #: reaches work queued from then on, never the backlog.
    max_attempts: int = 5
    #: The first retry delay; each later one doubles. Reaches the next claim.
    retry_base_seconds: int = 30
    #: The ceiling the doubling stops at. Reaches the next claim.
    retry_max_seconds: int = 3_600
    #: The default budget of one attempt, and so how long a claim is held
    #: before another runner may take the row. Reaches the next claim: an
    #: attempt already running keeps the lease it was claimed under.
    lease_seconds: int = 300
    #: Settled rows older than this many days are deleted by the sweep; 0
    #: keeps everything and schedules no sweep. Reaches the sweep's next pass.
    retention_days: int = 7

    @property
    def poll_interval(self) -> timedelta:
        return timedelta(milliseconds=self.poll_interval_ms)

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)

    def problems(self) -> list[str]:
        """Every reason these values cannot be used; empty when they can."""
        found = []
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int):
                found.append(f"{item.name} must be an integer, got {value!r}")
        if found:
            return found
        for name in ("poll_interval_ms", "max_concurrent", "max_attempts", "lease_seconds"):
            if getattr(self, name) < 1:
                found.append(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("retry_base_seconds", "retry_max_seconds", "retention_days"):
            if getattr(self, name) < 0:
                found.append(f"{name} must not be negative, got {getattr(self, name)}")
        if self.retry_base_seconds > self.retry_max_seconds:
            found.append(
                f"retry_base_seconds ({self.retry_base_seconds}) must not exceed "
                f"retry_max_seconds ({self.retry_max_seconds})"
            )
        return found


KEYS = tuple(item.name for item in dataclasses.fields(JobsSettings))


def from_mapping(values: dict[str, Any]) -> JobsSettings:
    """Build settings from a mapping of the seven keys, refusing unknown or bad ones."""
    unknown = sorted(set(values) - set(KEYS))
    if unknown:
        raise ImproperlyConfigured(
            f"settings.JOBS has unknown keys {unknown}; the keys are {list(KEYS)}"
        )
    built = JobsSettings(**values)
    problems = built.problems()
    if problems:
        raise ImproperlyConfigured("settings.JOBS is not usable: " + "; ".join(problems))
    return built


def current() -> JobsSettings:
    """The config in force now; cheap enough to call on every pass and enqueue."""
    configured = getattr(settings, "JOBS", None) or {}
    if not isinstance(configured, Mapping):
        raise ImproperlyConfigured(
            f"settings.JOBS must be a dict of the queue's keys, not {type(configured).__name__}"
        )
    return from_mapping(dict(configured))
