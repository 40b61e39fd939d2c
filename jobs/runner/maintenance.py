"""Start-up work: every handler's `recover`, once, before the loop.

A `recover` that raises is logged and the others still run: one broken
handler must not keep the runner from draining everybody else's work.
"""

from __future__ import annotations

import logging
import traceback

from jobs import log
from jobs.registry import Registry


def recover_all(registry: Registry) -> None:
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
