"""How `manage.py jobs` words a duration or an instant: short, as a person would say it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobs.presentation import duration, relative


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (0, 45, 60, 250, 3600, 3900, 86400, 97200)] == [
        "0s",
        "45s",
        "1m",
        "4m 10s",
        "1h",
        "1h 5m",
        "1d",
        "1d 3h",
    ], "a duration is short and rounded to the unit that matters"
    now = timezone.now()
    assert relative(now + timedelta(minutes=5), now) == "in 5m"
    assert relative(now - timedelta(hours=2), now) == "2h ago"
    assert relative(now, now) == "now"
