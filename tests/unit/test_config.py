"""The effective `[jobs]` config: the seed's seven keys and defaults, validation that
names the key at fault, `settings.JOBS` as the source, and the system checks."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.core.checks import CheckMessage
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import ConnectionHandler

import jobs.checks
import jobs.store
from jobs import config
from jobs.checks import check_databases, check_metrics_token, check_settings
from jobs.config import JobsSettings, from_mapping
from jobs.metrics.views import METRICS_TOKEN_MIN_LENGTH

#: The seed's `[jobs]` defaults, as the original config documents them.
SEED_DEFAULTS = {
    "poll_interval_ms": 1_000,
    "max_concurrent": 8,
    "max_attempts": 5,
    "retry_base_seconds": 30,
    "retry_max_seconds": 3_600,
    "lease_seconds": 300,
    "retention_days": 7,
}
#: The keys added since the seed, for failover (issue 22), and their defaults.
FAILOVER_DEFAULTS = {"heartbeat_seconds": 10, "hard_kill_after": 60}


def test_the_defaults_are_the_seeds():
    assert dataclasses.asdict(JobsSettings()) == SEED_DEFAULTS | FAILOVER_DEFAULTS, (
        "the seed's seven keys with their defaults, and the two failover keys"
    )
    assert tuple(SEED_DEFAULTS | FAILOVER_DEFAULTS) == config.KEYS, "KEYS lists the nine keys"


def test_the_defaults_are_usable():
    assert JobsSettings().problems() == [], "the defaults pass their own validation"


def test_an_empty_mapping_gives_the_defaults():
    assert from_mapping({}) == JobsSettings(), "every missing key takes its default"


def test_a_partial_mapping_overrides_only_the_keys_it_names():
    built = from_mapping({"max_concurrent": 16, "retention_days": 0})
    assert built.max_concurrent == 16, "a named key takes its value"
    assert built.retention_days == 0, "zero retention (keep everything) is allowed"
    assert dataclasses.replace(built, max_concurrent=8, retention_days=7) == JobsSettings(), (
        "the keys left out keep their defaults"
    )


def test_the_interval_and_lease_read_as_timedeltas():
    built = from_mapping({"poll_interval_ms": 250, "lease_seconds": 90})
    assert built.poll_interval == timedelta(milliseconds=250), "poll_interval is in milliseconds"
    assert built.lease == timedelta(seconds=90), "lease is in seconds"


def test_an_unknown_key_is_refused_naming_it():
    """A typo (`max_attempt`) silently ignored would leave the default in force unnoticed."""
    with pytest.raises(ImproperlyConfigured) as refused:
        from_mapping({"max_attempt": 3, "enabled": True})
    message = str(refused.value)
    assert "max_attempt" in message, "the refusal names the unknown key"
    assert "enabled" in message, "and every other unknown key"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("poll_interval_ms", 0),
        ("max_concurrent", 0),
        ("max_attempts", 0),
        ("lease_seconds", 0),
        ("max_attempts", -1),
        ("retry_base_seconds", -1),
        ("retry_max_seconds", -1),
        ("retention_days", -1),
        ("max_concurrent", "8"),
        ("max_attempts", 2.5),
        ("lease_seconds", None),
        ("max_concurrent", True),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(key, value):
    with pytest.raises(ImproperlyConfigured) as refused:
        from_mapping({key: value})
    assert key in str(refused.value), f"the refusal names {key}: {refused.value}"


@pytest.mark.parametrize("key", ["retry_base_seconds", "retry_max_seconds", "retention_days"])
def test_zero_is_allowed_where_it_means_something(key):
    """Zero base = retry at once; zero max with it; zero retention = keep everything."""
    values = {key: 0, "retry_base_seconds": 0} if key == "retry_max_seconds" else {key: 0}
    assert getattr(from_mapping(values), key) == 0, f"{key} may be zero"


def test_a_retry_base_above_the_retry_ceiling_is_refused():
    with pytest.raises(ImproperlyConfigured) as refused:
        from_mapping({"retry_base_seconds": 600, "retry_max_seconds": 60})
    message = str(refused.value)
    assert "retry_base_seconds" in message, "the refusal names the base"
    assert "retry_max_seconds" in message, "and the ceiling it exceeds"


def test_a_retry_base_equal_to_the_ceiling_is_allowed():
    built = from_mapping({"retry_base_seconds": 60, "retry_max_seconds": 60})
    assert (built.retry_base_seconds, built.retry_max_seconds) == (60, 60), "equal is fine"


def test_every_problem_is_reported_at_once():
    """An operator fixing config one error per restart is an operator having a bad day."""
    problems = JobsSettings(max_attempts=0, lease_seconds=0, retention_days=-1).problems()
    assert len(problems) == 3, f"all three problems are reported: {problems}"


# -- initial(): settings.JOBS, where a new config row starts ----------------------


def test_initial_reads_settings_jobs(settings):
    settings.JOBS = {"max_attempts": 3, "poll_interval_ms": 250}
    assert config.initial() == JobsSettings(max_attempts=3, poll_interval_ms=250), (
        "initial() is settings.JOBS over the defaults"
    )


def test_initial_reads_settings_jobs_afresh_on_every_call(settings):
    """A config row created later starts from the settings as they are then."""
    settings.JOBS = {"max_concurrent": 2}
    assert config.initial().max_concurrent == 2, "the first read sees the first value"
    settings.JOBS = {"max_concurrent": 4}
    assert config.initial().max_concurrent == 4, "the next read sees the change"


@pytest.mark.parametrize("empty", [None, {}], ids=["none", "empty-dict"])
def test_initial_takes_the_defaults_when_settings_jobs_is_empty(settings, empty):
    settings.JOBS = empty
    assert config.initial() == JobsSettings(), "an empty settings.JOBS means the defaults"


def test_initial_takes_the_defaults_without_settings_jobs(settings):
    del settings.JOBS
    assert config.initial() == JobsSettings(), "a project with no JOBS setting gets the defaults"


def test_initial_refuses_a_bad_settings_jobs(settings):
    settings.JOBS = {"max_attempts": 0}
    with pytest.raises(ImproperlyConfigured, match="max_attempts"):
        config.initial()


@pytest.mark.parametrize("value", [5, "max_attempts", ["x"]], ids=["int", "str", "list"])
def test_initial_refuses_a_settings_jobs_that_is_not_a_mapping(settings, value):
    """JOBS = "..." is an easy slip; it must be reported as config, not as a ValueError."""
    settings.JOBS = value
    with pytest.raises(ImproperlyConfigured) as refused:
        config.initial()
    assert "settings.JOBS" in str(refused.value), "the refusal says settings.JOBS is at fault"


# -- system checks ------------------------------------------------------------------


def test_the_settings_check_passes_a_usable_settings_jobs(settings):
    settings.JOBS = {"max_attempts": 3}
    assert check_settings(None) == [], "a usable settings.JOBS raises no check"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"retry_base_seconds": 10, "retry_max_seconds": 5}, "retry_base_seconds"),
        ({"maxattempts": 3}, "maxattempts"),
        ({"lease_seconds": "300"}, "lease_seconds"),
    ],
)
def test_the_settings_check_reports_an_unusable_settings_jobs_as_e003(settings, value, named):
    """`manage.py check` (and every start-up) says what is wrong before a runner trips on it."""
    settings.JOBS = value
    errors = check_settings(None)
    assert [error.id for error in errors] == ["jobs.E003"], "one jobs.E003 error is reported"
    assert named in errors[0].msg, f"the error names {named}: {errors[0].msg}"


@pytest.mark.parametrize("value", [5, "max_attempts", ["x"]], ids=["int", "str", "list"])
def test_the_settings_check_reports_a_settings_jobs_that_is_not_a_mapping_as_e003(settings, value):
    """A check that raises crashes `manage.py check` instead of reporting the problem."""
    settings.JOBS = value
    errors = check_settings(None)
    assert [error.id for error in errors] == ["jobs.E003"], "one jobs.E003 error is reported"
    assert "settings.JOBS" in errors[0].msg, f"the error names settings.JOBS: {errors[0].msg}"


def sqlite_connections(**options: object) -> ConnectionHandler:
    """A connection handler with one SQLite database using `options`; never connects."""
    database = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:", "OPTIONS": options}
    return ConnectionHandler({"default": database})


def e001(errors: list[CheckMessage]) -> list[CheckMessage]:
    return [error for error in errors if error.id == "jobs.E001"]


@pytest.mark.parametrize(
    "options",
    [{}, {"transaction_mode": "DEFERRED"}, {"transaction_mode": "EXCLUSIVE"}, {"timeout": 20}],
    ids=["no-options", "deferred", "exclusive", "other-options-only"],
)
def test_the_database_check_reports_sqlite_without_immediate_transactions_as_e001(
    monkeypatch, options
):
    """Without BEGIN IMMEDIATE concurrent claims fail with "database is locked" mid-incident."""
    monkeypatch.setattr(jobs.checks, "connections", sqlite_connections(**options))
    errors = e001(check_databases(None))
    assert len(errors) == 1, "an SQLite database without IMMEDIATE is reported as jobs.E001"
    assert "default" in errors[0].msg, "the error names the database alias"
    assert "transaction_mode" in (errors[0].hint or ""), "the hint says which option to set"


@pytest.mark.parametrize("mode", ["IMMEDIATE", "immediate"])
def test_the_database_check_accepts_sqlite_with_immediate_transactions(monkeypatch, mode):
    monkeypatch.setattr(jobs.checks, "connections", sqlite_connections(transaction_mode=mode))
    assert e001(check_databases(None)) == [], "IMMEDIATE (in any case) satisfies jobs.E001"


def test_the_projects_own_databases_pass_the_database_check():
    """The shipped settings configure SQLite correctly, and PostgreSQL is supported."""
    assert check_databases(None) == [], "the project's databases raise no jobs check"


def test_the_database_check_accepts_mysql_and_reports_an_unsupported_vendor_as_e002(monkeypatch):
    """MySQL and MariaDB have a store of their own; a vendor without one is refused up front."""
    pytest.importorskip("MySQLdb", reason="Django's MySQL backend needs requirements-mysql.txt")
    handler = ConnectionHandler(
        {
            "default": {"ENGINE": "django.db.backends.mysql", "NAME": "jobs"},
            "legacy": {"ENGINE": "django.db.backends.dummy"},
        }
    )
    monkeypatch.setattr(jobs.checks, "connections", handler)
    monkeypatch.setattr(jobs.store, "connections", handler)
    errors = [error for error in check_databases(None) if error.id == "jobs.E002"]
    assert len(errors) == 1, "only the database without a store is reported"
    assert "'legacy'" in errors[0].msg, "the error names the unsupported database"


@pytest.mark.parametrize("token", ["short", 12345678901234567890, b"0123456789abcdefghij"])
def test_a_metrics_token_that_is_short_or_not_a_string_is_reported_as_e008(settings, token):
    """The metrics view would be open to anyone who guessed it."""
    settings.JOBS_METRICS_TOKEN = token
    assert [error.id for error in check_metrics_token(None)] == ["jobs.E008"]


@pytest.mark.parametrize("token", ["", None, "x" * METRICS_TOKEN_MIN_LENGTH])
def test_no_metrics_token_or_a_long_one_passes_the_check(settings, token):
    settings.JOBS_METRICS_TOKEN = token
    assert check_metrics_token(None) == []
