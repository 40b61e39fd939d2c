"""System checks for misconfiguration that would otherwise surface mid-incident.

Stable ids: `jobs.E001` SQLite without an immediate transaction mode (claims
could fail with "database is locked" instead of waiting), `jobs.E002` a
database vendor the store does not support (PostgreSQL, MySQL / MariaDB and
SQLite are; Django itself refuses MySQL and MariaDB versions too old for
SKIP LOCKED), `jobs.E003` an unusable `settings.JOBS`, `jobs.E004` (with
`--database`) a config row edited into nonsense, `jobs.E005` a database whose
driver jobs needs is not installed (naming the extra that installs it),
`jobs.E006` `TASKS` naming `jobs.tasks.JobsBackend` while `jobs` is not in
`INSTALLED_APPS` (raised by the backend's own `check()`, which Django's tasks
check calls: without the app, nothing in this module is ever imported),
`jobs.E007` a schedule that cannot work (`JOBS_SCHEDULES` or a handler's
`schedule`: a bad expression or zone, an unknown kind or task, both or
neither of `cron` and `every`), one error per schedule, naming it; `runjobs`
refuses to start with the same sentences; `jobs.E008` a `JOBS_METRICS_TOKEN`
that is not a string, or shorter than `METRICS_TOKEN_MIN_LENGTH` (a token
that short can be guessed, and the metrics view would then be open to it).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

from jobs import config
from jobs.drivers import MissingDriver
from jobs.models import JobsConfig
from jobs.registry import registry
from jobs.schedules import plan
from jobs.store import for_database


@checks.register()
def check_databases(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    for alias in connections:
        try:
            for_database(alias)
        except MissingDriver as error:
            found.append(checks.Error(str(error), id="jobs.E005"))
            continue  # Django cannot load this database's backend either
        except ImproperlyConfigured as error:
            found.append(checks.Error(str(error), id="jobs.E002"))
        connection = connections[alias]
        if connection.vendor == "sqlite":
            mode = (connection.settings_dict.get("OPTIONS") or {}).get("transaction_mode")
            if str(mode).upper() != "IMMEDIATE":
                found.append(
                    checks.Error(
                        f"SQLite database {alias!r} does not use transaction_mode IMMEDIATE.",
                        hint="Set DATABASES[...]['OPTIONS']['transaction_mode'] = 'IMMEDIATE' so "
                        "concurrent claims wait for the write lock instead of failing.",
                        id="jobs.E001",
                    )
                )
    return found


@checks.register()
def check_settings(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        config.initial()
    except (ImproperlyConfigured, TypeError) as error:
        return [checks.Error(str(error), id="jobs.E003")]
    return []


@checks.register(checks.Tags.database)
def check_config_row(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    """Runs with `check --database`: a row edited into nonsense by hand."""
    found: list[checks.CheckMessage] = []
    for alias in kwargs.get("databases") or []:
        try:
            row = JobsConfig.objects.using(alias).filter(pk=JobsConfig.SINGLETON_ID).first()
        except DatabaseError:
            continue  # not migrated yet: nothing to check
        problems = row.as_settings().problems() if row else []
        if problems:
            found.append(
                checks.Error(
                    f"the JobsConfig row in {alias!r} is not usable: " + "; ".join(problems),
                    hint="Fix it in the admin; runners keep the last good config meanwhile.",
                    id="jobs.E004",
                )
            )
    return found


@checks.register(checks.Tags.security)
def check_metrics_token(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    # Here, not at the top: every process imports this module at start, and
    # the view (with its exposition) is only for the processes that serve it.
    from jobs.metrics.views import METRICS_TOKEN_MIN_LENGTH

    token = getattr(settings, "JOBS_METRICS_TOKEN", "")
    if token == "" or token is None:
        return []  # no token: only users with jobs.view_job read the metrics
    if not isinstance(token, str) or len(token) < METRICS_TOKEN_MIN_LENGTH:
        return [
            checks.Error(
                f"JOBS_METRICS_TOKEN must be a string of at least {METRICS_TOKEN_MIN_LENGTH} "
                f"characters, not {type(token).__name__} of length {len(str(token))}.",
                hint="Generate one: python -c 'import secrets; print(secrets.token_urlsafe())'",
                id="jobs.E008",
            )
        ]
    return []


@checks.register()
def check_schedules(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    return [checks.Error(problem, id="jobs.E007") for problem in plan.problems(registry)]
