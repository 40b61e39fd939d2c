"""A runner's start against a database that may not answer yet.

A deploy that starts workers before the database, or a failover in progress,
must not end `runjobs` with a traceback: the first step that needs the
database (reading the config row, registering the runner) is tried again
after a doubling wait until it succeeds or the runner is told to stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, connections

from jobs import log

#: The first wait after a failed start, doubled at each failure up to the last.
STARTUP_RETRY_FIRST_SECONDS = 0.5
STARTUP_RETRY_MAX_SECONDS = 5.0


def until_answered(step: Callable[[], None], stopping: threading.Event, using: str) -> bool:
    """Run `step` until the database on `using` lets it finish; False if
    `stopping` was set first.

    Each failure is logged as `runner_database_unavailable`, the connection
    closed (the next try opens a fresh one), and the wait ends early on a stop.
    """
    delay = STARTUP_RETRY_FIRST_SECONDS
    while not stopping.is_set():
        try:
            step()
            return True
        except (DatabaseError, InterfaceError) as error:
            log.event(
                "runner_database_unavailable",
                logging.WARNING,
                outcome="retrying",
                error=log.first_line(error),
                retry_in_seconds=delay,
            )
            connections[using].close()
            stopping.wait(delay)
            delay = min(delay * 2, STARTUP_RETRY_MAX_SECONDS)
    return False
