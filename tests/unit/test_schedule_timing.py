"""Fire times, as pure arithmetic: cron in a zone across DST changes, `every`
on the epoch's grid, and what follows an occurrence that ran early, late or long."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobs.schedules.timing import MISSED_AFTER, Next, Timing, TimingError

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def fires(timing: Timing, start: datetime, count: int) -> list[datetime]:
    """`count` fire times after `start`, each reckoned from the one before."""
    found, moment = [], start
    for _ in range(count):
        moment = timing.after(moment)
        found.append(moment)
    return found


@pytest.mark.parametrize(
    ("zone", "day", "skipped_local", "runs_at"),
    [
        # Paris springs from 02:00 to 03:00 on the last Sunday of March.
        (
            "Europe/Paris",
            datetime(2026, 3, 29),
            "30 2 * * *",
            datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        ),
        # New York springs from 02:00 to 03:00 on the second Sunday of March.
        (
            "America/New_York",
            datetime(2026, 3, 8),
            "30 2 * * *",
            datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
        ),
    ],
)
def test_a_fire_time_inside_the_hour_spring_skips_runs_once_at_the_end_of_the_gap(
    zone, day, skipped_local, runs_at
):
    timing = Timing(cron=skipped_local, zone=zone)
    start = day.replace(tzinfo=ZoneInfo(zone)) - timedelta(hours=12)
    first, second = fires(timing, start, 2)
    assert first == runs_at, "02:30 does not exist that night: it runs at 03:00, once"
    assert first.astimezone(ZoneInfo(zone)).hour == 3
    assert second - first == timedelta(hours=23, minutes=30), "and 02:30 the next day"


@pytest.mark.parametrize(
    ("zone", "expression", "start", "first"),
    [
        # New York falls back from 02:00 to 01:00: 01:30 happens twice.
        (
            "America/New_York",
            "30 1 * * *",
            datetime(2026, 10, 31, 12, tzinfo=NEW_YORK),
            datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # 01:30 EDT, the first of the two
        ),
        # Paris falls back from 03:00 to 02:00: 02:30 happens twice.
        (
            "Europe/Paris",
            "30 2 * * *",
            datetime(2026, 10, 24, 12, tzinfo=PARIS),
            datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST, the first of the two
        ),
    ],
)
def test_a_fire_time_inside_the_hour_autumn_repeats_runs_once_at_its_first_instant(
    zone, expression, start, first
):
    timing = Timing(cron=expression, zone=zone)
    found = fires(timing, start, 2)
    assert found[0] == first, "the earlier of the two instants (summer time)"
    assert found[1] - found[0] == timedelta(hours=25), "not again an hour later: next day"


def test_an_expression_firing_every_half_hour_keeps_firing_through_the_repeated_hour():
    timing = Timing(cron="*/30 * * * *", zone="Europe/Paris")
    found = fires(timing, datetime(2026, 10, 25, 1, 40, tzinfo=PARIS), 6)
    gaps = {b - a for a, b in itertools.pairwise(found)}
    assert gaps == {timedelta(minutes=30)}, "every half hour of real time, the repeat included"


def test_an_expression_is_read_in_its_zone():
    paris = Timing(cron="0 2 * * *", zone="Europe/Paris")
    utc = Timing(cron="0 2 * * *", zone="UTC")
    start = datetime(2026, 1, 10, tzinfo=UTC)
    assert paris.after(start) == datetime(2026, 1, 10, 1, tzinfo=UTC)
    assert utc.after(start) == datetime(2026, 1, 10, 2, tzinfo=UTC)


def test_every_fires_on_the_grid_of_its_interval_since_the_epoch():
    timing = Timing(every=300)
    assert timing.after(datetime(2026, 1, 1, 10, 2, 17, tzinfo=UTC)) == datetime(
        2026, 1, 1, 10, 5, tzinfo=UTC
    )
    assert timing.after(datetime(2026, 1, 1, 10, 5, tzinfo=UTC)) == datetime(
        2026, 1, 1, 10, 10, tzinfo=UTC
    ), "strictly after: a fire time is not its own successor"
    assert timing.at_or_before(datetime(2026, 1, 1, 10, 5, tzinfo=UTC)) == datetime(
        2026, 1, 1, 10, 5, tzinfo=UTC
    )


def test_the_last_fire_time_at_or_before_a_moment_includes_the_moment_itself():
    timing = Timing(cron="30 2 * * *", zone="UTC")
    on = datetime(2026, 1, 2, 2, 30, tzinfo=UTC)
    assert timing.at_or_before(on) == on
    assert timing.at_or_before(on - timedelta(seconds=1)) == on - timedelta(days=1)


DUE = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HOURLY = Timing(cron="0 * * * *", zone="UTC")


def test_the_next_occurrence_is_reckoned_from_the_fire_time_not_from_the_settle():
    ended = DUE + timedelta(minutes=40)
    assert HOURLY.following(DUE, DUE + timedelta(seconds=3), ended, once=False) == Next(
        DUE + timedelta(hours=1), DUE + timedelta(hours=1)
    )


def test_an_occurrence_run_early_leaves_its_fire_time_to_the_next_one():
    early = DUE - timedelta(minutes=30)
    assert HOURLY.following(DUE, early, early + timedelta(seconds=5), once=False) == Next(DUE, DUE)


def test_fire_times_passed_during_a_long_occurrence_are_skipped_or_with_once_run_at_once():
    ended = DUE + timedelta(hours=2, minutes=10)
    skipped = HOURLY.following(DUE, DUE, ended, once=False)
    assert skipped == Next(DUE + timedelta(hours=3), DUE + timedelta(hours=3))
    caught_up = HOURLY.following(DUE, DUE, ended, once=True)
    assert caught_up == Next(DUE + timedelta(hours=2), ended), "one run at once, for both"


def test_an_occurrence_started_late_stood_for_every_fire_time_before_its_start():
    started = DUE + timedelta(hours=3, minutes=5)
    nxt = HOURLY.following(DUE, started, started + timedelta(minutes=1), once=True)
    assert nxt == Next(DUE + timedelta(hours=4), DUE + timedelta(hours=4))


def test_a_fire_time_is_missed_once_its_occurrence_is_more_than_the_grace_late():
    assert not HOURLY.missed(DUE, DUE + MISSED_AFTER)
    assert HOURLY.missed(DUE, DUE + MISSED_AFTER + timedelta(seconds=1))
    every_minute = Timing(every=60)
    assert every_minute.missed(DUE, DUE + timedelta(minutes=1)), "or once the next fire came"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"cron": "0 2 * * *", "zone": "Europe/Paris"}, "At 02:00 every day"),
        ({"every": 300}, "Every 5 minutes"),
        ({"every": 3600}, "Every hour"),
        ({"every": 90}, "Every 90 seconds"),
    ],
)
def test_a_timing_says_itself_in_words(kwargs, words):
    assert Timing(**kwargs).describe() == words


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"cron": "61 * * * *"}, "bad cron expression '61 * * * *'"),
        ({"cron": "* * *"}, "bad cron expression"),
        ({"cron": "0 0 30 2 *"}, "bad cron expression"),
        ({"cron": "0 2 * * *", "every": 60}, "not both or neither"),
        ({}, "not both or neither"),
        ({"every": 0}, "from 1 second"),
        ({"every": "60"}, "a number of seconds"),
        ({"cron": "0 2 * * *", "zone": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
    ],
)
def test_a_timing_no_schedule_can_use_is_refused_with_the_reason(kwargs, error):
    with pytest.raises(TimingError, match=error.replace("*", r"\*").replace("(", r"\(")):
        Timing(**kwargs)
