"""Start-up work (every handler's `recover`, once, before the loop) and what a
config change asks of the queue's own maintenance.

A `recover` that raises is logged and the others still run: one broken
handler must not keep the runner from draining everybody else's work.
"""

from __future__ import annotations

import logging
import traceback

from jobs import log, sweep
from jobs.config import JobsSettings
from jobs.registry import Registry
from jobs.schedules.reconcile import reconcile


def recover_all(registry: Registry, settings: JobsSettings, using: str | None = None) -> None:
    """Every handler's `recover`, then the schedules' reconcile (`jobs.schedules`),
    which leaves out the sweep while `retention_days` is 0."""
    for handler in registry:
        try:
            handler.recover()
        except Exception as error:
            log.event(
                "job_recover_failed",
                logging.ERROR,
                outcome="failure",
                kind=handler.kind,
                error=repr(error),
                traceback=traceback.format_exc(),
            )
        else:
            log.event("job_recovered", logging.DEBUG, outcome="recovered", kind=handler.kind)
    try:
        switched_off = [sweep.KIND] if settings.retention_days == 0 else []
        reconcile(registry, using, without=switched_off)
    except Exception as error:
        log.event(
            "schedules_reconcile_failed",
            logging.ERROR,
            outcome="failure",
            error=repr(error),
            traceback=traceback.format_exc(),
        )


def apply_config_change(
    previous: JobsSettings, current: JobsSettings, registry: Registry, using: str | None = None
) -> None:
    """Retention switched back on schedules the sweep again (switching it off
    stops the sweep at its next pass; see `jobs.sweep`)."""
    if previous.retention_days == 0 and current.retention_days > 0:
        reconcile(registry, using, only=sweep.KIND)
