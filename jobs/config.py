"""The queue's nine keys (the seed's seven, two for failover), each declared
once (`DECLARED`: default, bounds, grain, help, admin section), and
`settings.JOBS` as their source.

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
class Key:
    """One key of the live config, declared once.

    Everything else about a key is derived from this: `JobsSettings`'
    default, the bounds `problems()` checks, the `JobsConfig` field (default,
    validators, help text), the admin section it is edited in, and the
    README's table (`readme_table()`, which a test holds the README to).
    """

    name: str
    default: int
    #: Inclusive bounds. The upper one is sanity, not policy: past it a value
    #: is almost certainly a typo (milliseconds typed as seconds).
    low: int
    high: int
    #: The admin fieldset it is edited in.
    section: str
    #: What it sets, in a few words, for the README's table.
    sets: str
    #: When a saved change reaches the runners: the key's grain.
    reaches: str
    #: The admin form's help text; the migrations hold the same words.
    help: str


#: The queue's keys, in the order the admin and the README show them. The
#: comment above each says why its default is what it is.
DECLARED: tuple[Key, ...] = (
    # Milliseconds, so a test can go below a second. Takes effect at once:
    # lowering it is what an operator does because something is waiting now.
    Key(
        name="poll_interval_ms",
        default=1_000,
        low=1,
        high=3_600_000,  # an hour
        section="Runner",
        sets="how long an idle runner waits for work nobody woke it for",
        reaches="at once, cutting short a wait at the old value",
        help="Milliseconds an idle runner waits before looking for scheduled work (retries "
        "coming due, periodic jobs). Takes effect at once, cutting short a wait in progress.",
    ),
    # Eight keeps a restart after an upstream outage from becoming thousands
    # of concurrent callers against one service, and still drains a backlog
    # steadily. Lowering it cancels nothing in flight to reach a number.
    Key(
        name="max_concurrent",
        default=8,
        low=1,
        high=1_000,
        section="Runner",
        sets="attempts running at once per runner",
        reaches="at once when raised; when lowered, nothing is cancelled and new claims wait "
        "until running attempts finish",
        help="Attempts one runner runs at once. Raising it widens the pool at once; lowering it "
        "only stops new claims until enough running attempts finish (nothing is cancelled).",
    ),
    # Counted at claim, so a job that kills its process still spends one.
    # With the 30 s base, five attempts span about seven and a half minutes:
    # long enough to outlast a blip, short enough not to keep doomed work
    # alive. Frozen at enqueue: reaching the backlog would silently extend
    # work an operator had already given up on.
    Key(
        name="max_attempts",
        default=5,
        low=1,
        high=1_000,
        section="Attempts and retries",
        sets="attempts before a job is retired",
        reaches="jobs queued from then on, from every process (frozen at enqueue), "
        "never the backlog",
        help="Attempts a job gets before it is retired. Frozen onto each job when it is queued: "
        "a change reaches jobs queued from now on, never those already waiting.",
    ),
    # Longer than a round trip, so a retry is not the same failure again.
    Key(
        name="retry_base_seconds",
        default=30,
        low=0,
        high=86_400,  # a day
        section="Attempts and retries",
        sets="the first retry delay, doubling after",
        reaches="the next claim; a running attempt keeps what it was claimed under",
        help="Seconds before the first retry; each later retry waits twice as long. Reaches the "
        "next claim; a running attempt keeps the backoff it was claimed under.",
    ),
    # An hour keeps a day-long outage from scheduling the next attempt days out.
    Key(
        name="retry_max_seconds",
        default=3_600,
        low=0,
        high=2_592_000,  # 30 days
        section="Attempts and retries",
        sets="the ceiling of that doubling",
        reaches="the next claim",
        help="The longest wait between retries (the ceiling of the doubling). Reaches the next "
        "claim; a running attempt keeps the backoff it was claimed under.",
    ),
    # An attempt already running keeps the budget it was claimed under:
    # moving it mid-flight is how a working job gets reclaimed as crashed.
    Key(
        name="lease_seconds",
        default=300,
        low=1,
        high=86_400,  # a day
        section="Attempts and retries",
        sets="one attempt's default budget, and how long a claim is held",
        reaches="the next claim; a running attempt keeps its lease",
        help="Default time budget of one attempt, and how long a claim is held before another "
        "runner may take the job. Reaches the next claim; a running attempt keeps its lease.",
    ),
    # A week outlives a weekend, the span that matters for reading why work failed.
    Key(
        name="retention_days",
        default=7,
        low=0,
        high=3_650,  # ten years
        section="Retention",
        sets="how long settled rows are kept; 0 keeps all and stops the sweep",
        reaches="the sweep's next run; back above 0 schedules it again at once",
        help="Days settled jobs are kept before the sweep deletes them. 0 keeps everything and "
        "stops the sweep; setting it back above 0 schedules the sweep again. Reaches the "
        "sweep's next pass.",
    ),
    # A runner that dies has its rows taken by another within about three of
    # these, while a live runner's long attempt is never taken (its budget is
    # still enforced in-process).
    Key(
        name="heartbeat_seconds",
        default=10,
        low=0,
        high=3_600,  # an hour
        section="Failover",
        sets="how often a runner renews its running attempts' leases; a claim's lease is three "
        "of these (0: the lease is the whole budget, never renewed)",
        reaches="the next claim and the next renewal",
        help="Seconds between a runner's renewals of its running attempts' leases; a claim's "
        "lease is three of these, so a dead runner's jobs are taken by another within "
        "about three times this. 0 holds each claim for the attempt's whole budget instead. "
        "Reaches the next claim.",
    ),
    # A synchronous attempt past its budget is settled as timed out, but its
    # thread cannot be stopped: exiting is how a hung handler keeps no thread
    # or connection for ever.
    Key(
        name="hard_kill_after",
        default=60,
        low=0,
        high=86_400,  # a day
        section="Failover",
        sets="seconds an attempt may run past its budget before its process stops claiming, "
        "hands back its other attempts and exits (0: never)",
        reaches="the next claim",
        help="Seconds an attempt may run past its budget (a handler that cannot be "
        "interrupted) before its runner process stops claiming, hands back its other "
        "attempts and exits, to be restarted. 0 never. Reaches the next claim.",
    ),
)

#: Each key's declaration by name.
DECLARATION: dict[str, Key] = {key.name: key for key in DECLARED}

KEYS: tuple[str, ...] = tuple(key.name for key in DECLARED)

#: Inclusive bounds per key (from its declaration).
BOUNDS: dict[str, tuple[int, int]] = {key.name: (key.low, key.high) for key in DECLARED}


def _default(name: str) -> int:
    return DECLARATION[name].default


@dataclass(frozen=True)
class JobsSettings:
    """The keys' values, as a runner uses them; each default is its key's declared one."""

    poll_interval_ms: int = _default("poll_interval_ms")
    max_concurrent: int = _default("max_concurrent")
    max_attempts: int = _default("max_attempts")
    retry_base_seconds: int = _default("retry_base_seconds")
    retry_max_seconds: int = _default("retry_max_seconds")
    lease_seconds: int = _default("lease_seconds")
    retention_days: int = _default("retention_days")
    heartbeat_seconds: int = _default("heartbeat_seconds")
    hard_kill_after: int = _default("hard_kill_after")

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
        for key in DECLARED:
            value = getattr(self, key.name)
            if isinstance(value, bool) or not isinstance(value, int):
                found.append(f"{key.name} must be an integer, got {value!r}")
            elif not key.low <= value <= key.high:
                found.append(f"{key.name} must be between {key.low} and {key.high}, got {value}")
        if not found and self.retry_base_seconds > self.retry_max_seconds:
            found.append(
                f"retry_base_seconds ({self.retry_base_seconds}) must not exceed "
                f"retry_max_seconds ({self.retry_max_seconds})"
            )
        return found


# The attributes above are typed names for the declared keys, no more: a key
# declared without one, or one without a declaration, fails at import.
if tuple(item.name for item in dataclasses.fields(JobsSettings)) != KEYS:
    raise ImproperlyConfigured("JobsSettings' fields must be the declared keys, in order")

DEFAULTS = JobsSettings()


def sections() -> list[tuple[str, tuple[str, ...]]]:
    """The admin's fieldsets: each section with its keys, in declared order."""
    grouped: dict[str, list[str]] = {}
    for key in DECLARED:
        grouped.setdefault(key.section, []).append(key.name)
    return [(title, tuple(names)) for title, names in grouped.items()]


def readme_table() -> str:
    """The README's table of the keys, as markdown (a test holds the README to it)."""
    lines = [
        "| key | default | bounds | what it sets | a change reaches |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{key.name}` | {key.default} | {key.low} to {key.high} | {key.sets} | {key.reaches} |"
        for key in DECLARED
    ]
    return "\n".join(lines) + "\n"


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
