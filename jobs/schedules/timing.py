"""When a schedule fires: pure arithmetic on instants, no database, no clock.

A cron schedule's fire times are wall-clock times in its zone, evaluated by
cronsim, which keeps cronie's (Debian's cron) rules at a DST change: a fire
time inside the hour that spring skips runs once, at the first instant after
the gap (02:30 on a spring-forward night fires at 03:00); one inside the hour
that autumn repeats runs once, at its first occurrence (the earlier offset,
summer time); an expression that fires every hour or more often keeps firing
through both, since its wall-clock times are real instants either way.

An `every` schedule fires at the multiples of its interval since the Unix
epoch, so every runner computes the same instants and no restart or slow
attempt shifts them.

The next fire time is always reckoned from the fire time an occurrence was due
at, never from when it settled: that is what keeps a schedule from drifting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

#: A fire time counts as missed when its occurrence has not started within
#: this long of it (or before the schedule's next fire time, if that comes
#: first). Long enough that a runner restarting, or a queue a few minutes
#: behind, still runs it; short enough that a night's job is not run at noon.
MISSED_AFTER = timedelta(minutes=5)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TICK = timedelta(microseconds=1)
#: How many fire times `after` reads past one that is not after its moment.
_GUARD = 8


class TimingError(ValueError):
    """An expression, interval or zone no schedule can use."""


@dataclass(frozen=True)
class Timing:
    """A cron expression in a zone, or an interval in seconds."""

    cron: str | None = None
    every: float | None = None
    zone: str = "UTC"

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise TimingError("give either 'cron' or 'every', not both or neither")
        try:
            tz = ZoneInfo(self.zone)
        except (ValueError, KeyError, OSError) as error:
            raise TimingError(f"unknown timezone {self.zone!r}") from error
        object.__setattr__(self, "_tz", tz)
        if self.cron is not None:
            if not isinstance(self.cron, str):
                raise TimingError(f"'cron' must be a string, got {self.cron!r}")
            try:
                CronSim(self.cron, datetime.now(tz))
            except CronSimError as error:
                raise TimingError(f"bad cron expression {self.cron!r}: {error}") from None
        else:
            every = self.every
            if isinstance(every, bool) or not isinstance(every, int | float):
                raise TimingError(f"'every' must be a number of seconds, got {every!r}")
            if not math.isfinite(every) or not 1 <= every <= 366 * 86400:
                raise TimingError(f"'every' must be from 1 second to 366 days, got {every!r}")

    @property
    def tz(self) -> ZoneInfo:
        return self._tz  # type: ignore[attr-defined,no-any-return]

    def after(self, moment: datetime) -> datetime:
        """The first fire time strictly after `moment` (aware), in UTC."""
        if self.every is not None:
            step = timedelta(seconds=self.every)
            count = math.floor((moment - _EPOCH) / step) + 1
            return _EPOCH + count * step
        assert self.cron is not None
        fires = CronSim(self.cron, moment.astimezone(self.tz))
        for _ in range(_GUARD):
            found = next(fires).astimezone(UTC)
            if found > moment:
                return found
        # Never seen with real datetimes; a moment whose `fold` was lost (as
        # freezegun's datetimes lose it) could land here, and a fire time not
        # after `moment` would have a skipped occurrence claimed again at once.
        raise TimingError(f"{self.cron!r} found no fire time after {moment.isoformat()}")

    def at_or_before(self, moment: datetime) -> datetime:
        """The last fire time at or before `moment`, in UTC."""
        if self.every is not None:
            step = timedelta(seconds=self.every)
            return _EPOCH + math.floor((moment - _EPOCH) / step) * step
        assert self.cron is not None
        local = (moment + _TICK).astimezone(self.tz)
        return next(CronSim(self.cron, local, reverse=True)).astimezone(UTC)

    def missed(self, due: datetime, started: datetime) -> bool:
        """Whether an occurrence due at `due` that starts at `started` missed its
        fire time (see `MISSED_AFTER`)."""
        return started > due + MISSED_AFTER or started >= self.after(due)

    def following(self, due: datetime, started: datetime, now: datetime, once: bool) -> Next:
        """The occurrence to queue after one due at `due`, started at `started`,
        settling at `now`; `once` is the schedule's `missed="once"`.

        Reckoned from `due`: an occurrence run early (an operator's run-now)
        leaves its fire time to the next one; one that started late, having
        missed its fire time, stood for every fire time up to its start. Fire
        times that pass while it runs are skipped, or with `once` run by one
        occurrence due at once.
        """
        if started < due:
            upcoming = due
        elif self.missed(due, started):
            upcoming = self.after(self.at_or_before(started))
        else:
            upcoming = self.after(due)
        if upcoming > now:
            return Next(upcoming, upcoming)
        if once:
            return Next(self.at_or_before(now), now)
        return self.ahead(now)

    def resume(self, due: datetime | None, now: datetime, once: bool) -> Next:
        """The occurrence to queue for a schedule with no live one: new (no
        `due`), or its row lost (deleted by hand). A fire time still ahead,
        or only just passed, is kept; one missed is skipped, or with `once`
        run at once."""
        if due is None:
            return self.ahead(now)
        if due > now:
            return Next(due, due)
        if not self.missed(due, now):
            return Next(due, now)
        if once:
            return Next(self.at_or_before(now), now)
        return self.ahead(now)

    def ahead(self, now: datetime) -> Next:
        """The next fire time after `now`, run then."""
        upcoming = self.after(now)
        return Next(upcoming, upcoming)

    def describe(self) -> str:
        """The timing in words, for the admin and the CLI (the zone said apart)."""
        if self.cron is not None:
            return CronSim(self.cron, datetime.now(self.tz)).explain()
        assert self.every is not None
        return f"Every {_duration(self.every)}"


@dataclass(frozen=True)
class Next:
    """An occurrence to queue: the fire time it stands for, and when it may run
    (the same, except for a catch-up run due at once)."""

    fire_at: datetime
    run_at: datetime


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return unit if count == 1 else f"{count} {unit}s"
    return "second" if seconds == 1 else f"{seconds:g} seconds"
