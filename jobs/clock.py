"""One clock for every runner: the database's.

Every due-time and lease decision a runner makes (its claims, renewals and
timeouts, schedules' fire times, limits' windows) compares a time it reads
with times other runners wrote. Read from each machine's own clock, a runner
25 s ahead of another took all of that runner's healthy attempts, and one
60 s behind wrote leases already expired. So a runner reads the database's
clock instead, without a round trip per reading: it measures the offset of
the database's clock to its own at start and at every heartbeat
(`jobs.runner.heartbeat`), and `DatabaseClock` adds it to the machine's time.

A measurement reads the machine's clock before and after asking the
database for its time, and takes the database's to have been read at the
midpoint: it is right to within half the round trip. An offset within that
(and the clocks' resolution) is no offset at all, so a database on the same
machine, or with a clock in step, leaves every time exactly as the machine
reads it. SQLite shares the machine's clock: nothing is measured.

Nothing is measured while freezegun has frozen time (a frozen clock against
the database's real one would be a skew of years), and a runner given a
clock of its own (`Runner(clock=...)`, tests) never measures.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs import hot_settings, log

#: A skew larger than this is logged (`runner_clock_skew`) and shown on the
#: runners page. Smaller ones are corrected all the same; they are noise.
SKEW_SHOWN_ABOVE = timedelta(seconds=1)

#: The finest step either clock reads (both count microseconds; a
#: millisecond leaves room for a server that rounds).
RESOLUTION = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class Reading:
    """One measurement of the database's clock against this process's."""

    #: The database's clock less this process's, at the round trip's midpoint.
    offset: timedelta
    #: Half the round trip: how far off `offset` may be.
    uncertainty: timedelta

    @property
    def correction(self) -> timedelta:
        """What to add to this process's clock: the offset, or nothing when the
        offset is within what the measurement can tell apart from none."""
        if abs(self.offset) <= self.uncertainty + RESOLUTION:
            return timedelta(0)
        return self.offset

    @property
    def offset_ms(self) -> int:
        return round(self.offset / timedelta(milliseconds=1))

    @property
    def skewed(self) -> bool:
        """Whether the skew is large enough to tell an operator about."""
        return abs(self.correction) > SKEW_SHOWN_ABOVE


def reading(before: datetime, database: datetime, after: datetime) -> Reading:
    """The reading of a round trip that left at `before` and came back at `after`
    (this process's clock) with the database's time `database` (all aware)."""
    trip = after - before
    return Reading(offset=database - (before + trip / 2), uncertainty=trip / 2)


def frozen() -> bool:
    """Whether freezegun has frozen (or is ticking) this process's time."""
    api = sys.modules.get("freezegun.api")
    return bool(api is not None and getattr(api, "freeze_factories", None))


class DatabaseClock:
    """`timezone.now()` corrected by the last reading of database `using`'s clock.

    Called like `timezone.now` (aware with `USE_TZ`, naive local time
    without), at the same cost while there is no correction. One per
    database per process (`of`): every runner of the process on that
    database reads and corrects it.
    """

    def __init__(self, using: str) -> None:
        self.using = using
        #: Added to the machine's time: written by `measure`, read by every call.
        self.correction = timedelta(0)
        #: The last reading, or None before the first (and always on SQLite).
        self.last: Reading | None = None
        self._told = False

    def __call__(self) -> datetime:
        correction = self.correction
        if not correction:  # timezone.now(), without its read of settings.USE_TZ
            return datetime.now(UTC) if hot_settings.use_tz() else datetime.now()
        if frozen():
            return timezone.now()
        return timezone.now() + correction

    def measure(self, database_now: Callable[[], datetime | None]) -> Reading | None:
        """Read the database's clock (`database_now`, a store's verb; None where
        the database shares this machine's) and correct by it from now on; the
        reading, or None when nothing was measured. A skew past
        `SKEW_SHOWN_ABOVE` is logged when it appears, when it changes by more
        than that, and when it is gone."""
        if frozen():
            return None
        before = datetime.now(UTC)
        database = database_now()
        after = datetime.now(UTC)
        if database is None:
            return None
        found = reading(before, database.astimezone(UTC), after)
        previous, self.last, self.correction = self.last, found, found.correction
        self._tell(previous, found)
        return found

    def offset_ms(self) -> int | None:
        """The last reading's offset in milliseconds (the runners page shows it),
        or None where nothing was measured."""
        return None if self.last is None else self.last.offset_ms

    def _tell(self, previous: Reading | None, found: Reading) -> None:
        if found.skewed:
            moved = previous is None or abs(found.offset - previous.offset) > SKEW_SHOWN_ABOVE
            if moved or not self._told:
                self._told = True
                log.event(
                    "runner_clock_skew",
                    logging.WARNING,
                    outcome="corrected",
                    database=self.using,
                    offset_ms=found.offset_ms,
                    uncertainty_ms=round(found.uncertainty / timedelta(milliseconds=1), 1),
                    reason="the database's clock is this far ahead of this machine's "
                    "(negative: behind); the runner corrects its own time by it",
                )
        elif self._told:
            self._told = False
            log.event(
                "runner_clock_skew",
                outcome="gone",
                database=self.using,
                offset_ms=found.offset_ms,
            )


_clocks: dict[str, DatabaseClock] = {}


def of(using: str | None = None) -> DatabaseClock:
    """The corrected clock of database `using` in this process."""
    alias = using or DEFAULT_DB_ALIAS
    clock = _clocks.get(alias)
    if clock is None:
        clock = _clocks.setdefault(alias, DatabaseClock(alias))
    return clock


def now(using: str | None = None) -> datetime:
    """The time on database `using`'s clock, as far as this process has
    measured it (the machine's own until a runner has)."""
    return of(using)()
