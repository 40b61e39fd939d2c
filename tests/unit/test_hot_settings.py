"""The settings a runner keeps (`jobs.hot_settings`) follow every change Django
announces, so a kept value is never stale."""

from __future__ import annotations

from django.test import override_settings

from jobs import hot_settings
from jobs.clock import DatabaseClock


def test_a_kept_setting_follows_override_settings_both_ways():
    assert hot_settings.use_tz() is True
    with override_settings(USE_TZ=False, DEBUG=True):
        assert hot_settings.use_tz() is False
        assert hot_settings.debug() is True
    assert hot_settings.use_tz() is True
    assert hot_settings.debug() is False


def test_the_clock_answers_as_timezone_now_does_under_either_use_tz():
    clock = DatabaseClock("default")
    assert clock().tzinfo is not None, "aware with USE_TZ"
    with override_settings(USE_TZ=False):
        assert clock().tzinfo is None, "naive local time without"
