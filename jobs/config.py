"""The queue's nine keys (the seed's seven, two for failover): their defaults,
their bounds, and `settings.JOBS` as their source.

Pure: nothing here reads the database, so every module may import it (the
models take their fields' defaults and validators from it). Reading and
watching the `JobsConfig` row, which is the truth once it exists, is
`jobs.live_config`'s business.

The row is created on first use from `settings.JOBS` (which `JOBS_*`
environment variables fill) over the defaults below; afterwards an operator
edits it in the admin and every key reloads without a restart, each at its
own grain (said on each field). A runner reads the row at least once a
second, busy or idle, so a saved change reaches it within a second; SIGHUP, a
save in its own process, or (on PostgreSQL) a save anywhere reaches it at
once. A row it cannot use is logged and the last good config stays in force.

There is deliberately no `enabled` key: the runner is how the project finishes
work it has already promised somebody, so switching it off would strand that
work rather than disable a feature.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True)
class JobsSettings:
    #: How often an idle runner looks for work nobody woke it for: backoffs
    #: coming due, periodic jobs. Milliseconds, so a test can go below a second.
    #: Takes effect at once, cutting short a sleep at the old value: lowering
    #: it is what an operator does because something is waiting now.
    poll_interval_ms: int = 1_000
    #: How many attempts run at once in one runner. Eight keeps a restart after
    #: an upstream outage from becoming thousands of concurrent callers against
    #: one service, and still drains a backlog steadily. Raising it widens the
    #: next claim at once; lowering it only stops claiming until enough running
    #: attempts finish, since nothing in flight is cancelled to reach a number.
    max_concurrent: int = 8
    #: Attempts before a job is retired. Counted at claim, so a job that kills
    #: its process still spends one. With the 30 s base, five attempts span
    #: about seven and a half minutes: long enough to outlast a blip, short
    #: enough not to keep doomed work alive. Frozen onto each row at enqueue:
    #: a change reaches work queued from then on, never the backlog, which
    #: would silently extend work an operator had already given up on.
    max_attempts: int = 5
    #: The first retry delay; each later one doubles. Longer than a round trip,
    #: so a retry is not the same failure again. Reaches the next claim.
    retry_base_seconds: int = 30
    #: The ceiling of that doubling: an hour keeps a day-long outage from
    #: scheduling the next attempt days out. Reaches the next claim.
    retry_max_seconds: int = 3_600
    #: The default budget of one attempt, and so how long a claim is held
    #: before another runner may take the row. Reaches the next claim: an
    #: attempt already running keeps the lease it was claimed under, since
    #: moving it mid-flight is how a working job gets reclaimed as crashed.
    lease_seconds: int = 300
    #: Settled rows older than this many days are deleted by the sweep. A week
    #: outlives a weekend, the span that matters for reading why work failed.
    #: 0 keeps everything and stops the sweep being scheduled; setting it back
    #: above 0 schedules it again. Reaches the sweep's next pass.
    retention_days: int = 7
    #: How often a runner renews the leases of its running attempts; the lease
    #: written at claim is three of these, so a runner that dies has its rows
    #: taken by another within about three times this, while a live runner's long
    #: attempt is never taken (its budget is still enforced in-process). 0
    #: writes the whole budget as the lease, renewing nothing. Reaches the
    #: next claim and the next renewal.
    heartbeat_seconds: int = 10
    #: A synchronous attempt still running this long past its budget (settled
    #: as timed out, but its thread cannot be stopped) makes its process stop
    #: claiming, finish or hand back its other attempts, and exit, so that a
    #: hung handler keeps no thread or connection for ever. 0 never does.
    #: Reaches the next claim.
    hard_kill_after: int = 60

    @property
    def poll_interval(self) -> timedelta:
        return timedelta(milliseconds=self.poll_interval_ms)

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)

    @property
    def heartbeat(self) -> timedelta | None:
        """How often leases are renewed, or None when they are not."""
        return timedelta(seconds=self.heartbeat_seconds) if self.heartbeat_seconds else None

    def problems(self) -> list[str]:
        """Every reason these values cannot be used; empty when they can."""
        found = []
        for name in KEYS:
            value = getattr(self, name)
            low, high = BOUNDS[name]
            if isinstance(value, bool) or not isinstance(value, int):
                found.append(f"{name} must be an integer, got {value!r}")
            elif not low <= value <= high:
                found.append(f"{name} must be between {low} and {high}, got {value}")
        if not found and self.retry_base_seconds > self.retry_max_seconds:
            found.append(
                f"retry_base_seconds ({self.retry_base_seconds}) must not exceed "
                f"retry_max_seconds ({self.retry_max_seconds})"
            )
        return found


KEYS = tuple(item.name for item in dataclasses.fields(JobsSettings))

DEFAULTS = JobsSettings()

#: Inclusive bounds per key. The upper bounds are sanity, not policy: past
#: them a value is almost certainly a typo (milliseconds typed as seconds).
BOUNDS: dict[str, tuple[int, int]] = {
    "poll_interval_ms": (1, 3_600_000),  # up to an hour
    "max_concurrent": (1, 1_000),
    "max_attempts": (1, 1_000),
    "retry_base_seconds": (0, 86_400),  # up to a day
    "retry_max_seconds": (0, 2_592_000),  # up to 30 days
    "lease_seconds": (1, 86_400),  # up to a day
    "retention_days": (0, 3_650),  # up to ten years
    "heartbeat_seconds": (0, 3_600),  # up to an hour
    "hard_kill_after": (0, 86_400),  # up to a day
}


def from_mapping(values: dict[str, Any]) -> JobsSettings:
    """Settings from a mapping of (some of) the nine keys, refusing unknown or bad ones."""
    unknown = sorted(set(values) - set(KEYS))
    if unknown:
        raise ImproperlyConfigured(
            f"settings.JOBS has unknown keys {unknown}; the keys are {list(KEYS)}"
        )
    built = dataclasses.replace(DEFAULTS, **values)
    problems = built.problems()
    if problems:
        raise ImproperlyConfigured("settings.JOBS is not usable: " + "; ".join(problems))
    return built


@functools.cache
def initial() -> JobsSettings:
    """The values a new config row starts from: `settings.JOBS` over the defaults.

    Remembered until `settings.JOBS` changes (tests' `override_settings`):
    every enqueue asks for it, and building it each time was a tenth of an
    enqueue's own time.
    """
    configured = getattr(settings, "JOBS", None) or {}
    if not isinstance(configured, Mapping):
        raise ImproperlyConfigured(
            f"settings.JOBS must be a dict of the queue's keys, not {type(configured).__name__}"
        )
    return from_mapping(dict(configured))


def initial_sources() -> dict[str, str]:
    """Where each initial value came from, for `runjobs --print-config`."""
    configured = getattr(settings, "JOBS", None) or {}
    sources = {}
    for name in KEYS:
        variable = f"JOBS_{name.upper()}"
        if name in configured and variable in os.environ:
            sources[name] = f"environment ({variable})"
        elif name in configured:
            sources[name] = "settings.JOBS"
        else:
            sources[name] = "default"
    return sources


@receiver(setting_changed)
def _forget_initial(setting: str, **kwargs: Any) -> None:
    if setting == "JOBS":
        initial.cache_clear()
