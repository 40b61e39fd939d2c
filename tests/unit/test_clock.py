"""One clock (`jobs.clock`): the offset of the database's clock read at the
round trip's midpoint, corrected by only when it is more than the measurement
can tell from none, never measured under freezegun, and a skew past the
bound logged when it appears, moves or goes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from freezegun import freeze_time

from jobs.clock import SKEW_SHOWN_ABOVE, DatabaseClock, frozen, reading

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def test_the_offset_is_the_database_time_less_the_round_trips_midpoint():
    found = reading(T0, T0 + timedelta(seconds=25, milliseconds=5), T0 + 10 * MS)
    assert found.offset == timedelta(seconds=25)
    assert found.uncertainty == 5 * MS, "half the round trip"
    assert found.correction == timedelta(seconds=25)
    assert found.offset_ms == 25_000


def test_a_database_behind_gives_a_negative_offset():
    found = reading(T0, T0 - timedelta(seconds=60), T0 + 2 * MS)
    assert found.offset == -timedelta(seconds=60) - MS
    assert found.correction == found.offset
    assert found.skewed


def test_an_offset_within_half_the_round_trip_is_no_offset():
    """A database on the same machine reads its clock between the two local
    readings: whatever the trip took, the clocks agree and nothing is corrected."""
    for database in (T0, T0 + 3 * MS, T0 + 40 * MS):
        found = reading(T0, database, T0 + 40 * MS)
        assert abs(found.offset) <= found.uncertainty
        assert found.correction == timedelta(0)
        assert not found.skewed


def test_a_skew_past_the_bound_is_told_apart_from_one_within_it():
    within = reading(T0, T0 + SKEW_SHOWN_ABOVE, T0)
    past = reading(T0, T0 + SKEW_SHOWN_ABOVE + MS, T0)
    assert within.correction == SKEW_SHOWN_ABOVE, "corrected all the same"
    assert (within.skewed, past.skewed) == (False, True)


@pytest.fixture
def clock() -> DatabaseClock:
    """A clock of its own, never the process's (`jobs.clock.of`)."""
    return DatabaseClock("default")


def ahead(by: timedelta):
    return lambda: datetime.now(UTC) + by


def test_the_corrected_clock_adds_the_measured_offset_to_the_machines_time(clock, settings):
    settings.USE_TZ = True
    clock.measure(ahead(timedelta(seconds=30)))
    difference = clock() - timezone.now()
    assert timedelta(seconds=29) < difference < timedelta(seconds=31)
    assert 29_000 < clock.offset_ms() < 31_000


def test_where_the_database_shares_the_machines_clock_nothing_is_measured(clock):
    assert clock.measure(lambda: None) is None
    assert clock.offset_ms() is None
    assert clock.correction == timedelta(0)


def test_nothing_is_measured_while_freezegun_has_frozen_time_and_the_frozen_time_is_kept(clock):
    with freeze_time(T0):
        assert frozen()
        assert clock.measure(ahead(timedelta(days=400))) is None
        assert clock() == T0
    assert not frozen()
    assert clock.last is None


def test_under_freezegun_a_correction_measured_before_is_not_added_to_the_frozen_time(clock):
    clock.measure(ahead(timedelta(seconds=30)))
    with freeze_time(T0):
        assert clock() == T0, "frozen tests see the time they froze"


def skew_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        getattr(record, "fields", {})
        for record in caplog.records
        if getattr(record, "event", "") == "runner_clock_skew"
    ]


def test_a_skew_is_logged_when_it_appears_when_it_moves_and_when_it_goes_not_at_every_beat(
    clock, caplog
):
    with caplog.at_level(logging.INFO, logger="jobs"):
        clock.measure(ahead(timedelta(seconds=25)))
        clock.measure(ahead(timedelta(seconds=25)))
        clock.measure(ahead(timedelta(seconds=25, milliseconds=300)))
        assert [fields["outcome"] for fields in skew_events(caplog)] == ["corrected"], (
            "logged once while it holds still"
        )
        clock.measure(ahead(timedelta(seconds=60)))
        clock.measure(ahead(timedelta(0)))
        clock.measure(ahead(timedelta(0)))
    told = skew_events(caplog)
    assert [fields["outcome"] for fields in told] == ["corrected", "corrected", "gone"]
    assert 24_900 < told[0]["offset_ms"] < 25_100  # type: ignore[operator]
    assert 59_900 < told[1]["offset_ms"] < 60_100  # type: ignore[operator]
