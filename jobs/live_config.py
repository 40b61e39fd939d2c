"""The live config: the `JobsConfig` row as the queue reads it, and how a runner keeps up with it.

The row is the truth once it exists (`jobs.config` says what it starts from
and why each key's default is what it is). `current()` is one read that
refuses an unusable row; `LiveConfig` is a runner's view, which never fails:
a row edited into nonsense by hand is logged and the last good config stays
in force. `generation()` counts saves of the row in this process, so a runner
here applies one at once rather than at its next config check (the save
itself rings the runners: `jobs.wakeup.config_saved`).
"""

from __future__ import annotations

import logging

from django.core.exceptions import ImproperlyConfigured

from jobs import log
from jobs.config import KEYS, JobsSettings, initial, initial_sources
from jobs.models import JobsConfig

_generation = 0


def generation() -> int:
    """How many times the config row has been saved in this process."""
    return _generation


def saved() -> None:
    """Note a save of the config row in this process (runners re-read it)."""
    global _generation
    _generation += 1


def current(using: str | None = None) -> JobsSettings:
    """The config in the row now (created from `initial()` if absent).

    Raises ImproperlyConfigured for a row that cannot be used; a runner goes
    through `LiveConfig`, which keeps the last good config instead.
    """
    row = JobsConfig.load(using)
    found = row.as_settings()
    problems = found.problems()
    if problems:
        raise ImproperlyConfigured("the JobsConfig row is not usable: " + "; ".join(problems))
    return found


class LiveConfig:
    """A runner's view of the row: re-read on demand, last good kept on a bad read.

    A row edited into nonsense by hand is logged once per distinct problem,
    and the runner carries on with what it had: config must never crash or
    stall the runner.
    """

    def __init__(self, using: str | None = None) -> None:
        self.using = using
        self.last_good: JobsSettings | None = None
        self._last_problem: str | None = None

    def __call__(self) -> JobsSettings:
        row: JobsConfig = JobsConfig.load(self.using)
        found = row.as_settings()
        problems = found.problems()
        if problems:
            problem = "; ".join(problems)
            if problem != self._last_problem:
                self._last_problem = problem
                log.event(
                    "jobs_config_invalid",
                    logging.ERROR,
                    outcome="kept_last_good",
                    error=problem,
                )
            return self.last_good or initial()
        self._last_problem = None
        if found != self.last_good:
            if self.last_good is not None:
                changed = {
                    name: getattr(found, name)
                    for name in KEYS
                    if getattr(found, name) != getattr(self.last_good, name)
                }
                log.event("jobs_config_reloaded", outcome="reloaded", **changed)
            self.last_good = found
        return found


def describe(using: str | None = None) -> list[str]:
    """The effective config as text lines, saying where each value comes from."""
    start, sources = initial(), initial_sources()
    row = JobsConfig.objects.using(using or "default").filter(pk=JobsConfig.SINGLETON_ID).first()
    lines = [f"{'key':<20} {'value':>9}  source"]
    problems = row.as_settings().problems() if row else []
    for name in KEYS:
        # The row does not remember what it was created from, and settings or
        # the environment may have changed since: compare with what they say now.
        now_says = f"{sources[name]} says {getattr(start, name)}"
        if row is None:
            value, source = getattr(start, name), f"{sources[name]} (no config row yet)"
        elif getattr(row, name) == getattr(start, name):
            value, source = getattr(row, name), f"config row (as {sources[name]} says)"
        else:
            value = getattr(row, name)
            source = f"config row ({now_says}: not used, the row is the truth)"
        lines.append(f"{name:<20} {value!s:>9}  {source}")
    if row is not None:
        lines.append(f"config row last saved {row.updated_at.isoformat()}")
    if problems:
        lines.append("THE CONFIG ROW IS NOT USABLE: " + "; ".join(problems))
        lines.append("Runners log this and keep the last good config; fix it in the admin.")
    return lines
