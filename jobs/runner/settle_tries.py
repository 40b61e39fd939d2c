"""A settle tried again on a transient database error: a few tries over a few seconds.

A settle that fails leaves its row `running` until its lease ends; another
runner then takes it and runs the attempt again. When the failure was of the
moment (a dropped connection, a server restarting, a deadlock or
serialization failure, "too many clients" for a runner holding fewer
connections than it needs: `jobs.store.transient` says which), waiting a
moment and trying again on a new connection is cheaper than all that, and
is what lets a worker whose settle could not get a connection succeed a
moment later. Each further try follows a pause (doubling, jittered), after
the thread's connection is closed (the next try opens a new one); each is
logged with what the failed try and the pause cost (`job_settle_retried`),
and a settle that recovered says how many tries it took
(`job_settle_recovered`). When the tries run out, `GaveUp` carries the last
error to the caller, which logs `job_settle_failed` and leaves the row to its
lease, as before; for a few seconds after that, that thread's settles are
tried once each (`QUIET_SECONDS`).

Trying again is safe because every settle is fenced on its attempt: a try
whose commit reached the database though its answer was lost makes the next
try find the row no longer its own (`job_settle_lost`), never write it twice.
Any other error is raised at once: it would fail the same way again.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DatabaseError, connections

from jobs import log
from jobs.models import Job
from jobs.retirement import job_fields
from jobs.store.transient import transient

#: The pauses before each further try, in seconds (each jittered by up to
#: half either way): six tries over about three seconds, short enough for
#: the loop thread that settles a batch, long enough for a connection to free
#: up or a server to come back from a restart's first refusals.
PAUSES = (0.1, 0.2, 0.4, 0.8, 1.6)

#: For this long after a settle on a thread ran out of tries, that thread's
#: next settles are tried once each: the database was not answering a moment
#: ago, and the loop thread, which times out and releases attempts one by
#: one, must not wait out every attempt's pauses in turn.
QUIET_SECONDS = 10.0


class GaveUp(Exception):
    """Every try of a settle failed on a transient error; `error` is the last."""

    def __init__(self, error: Exception, tries: int, spent_ms: int) -> None:
        super().__init__(f"{error!r} after {tries} tries over {spent_ms} ms")
        self.error = error
        self.tries = tries
        self.spent_ms = spent_ms


def settles_failed(jobs: Sequence[Job], error: Exception, using: str, *, traced: bool) -> None:
    """Log each of `jobs` as a settle that failed for good with `error` (the
    last of its tries, for a `GaveUp`), with the traceback when `traced`, and
    let go of the thread's connection if the database broke it."""
    cause, tries = (error.error, error.tries) if isinstance(error, GaveUp) else (error, 1)
    extra = {"traceback": "".join(traceback.format_exception(cause))} if traced else {}
    for job in jobs:
        log.event(
            "job_settle_failed",
            logging.ERROR,
            outcome="failure",
            **job_fields(job),
            error=repr(cause),
            tries=tries,
            **extra,
        )
    if isinstance(cause, DatabaseError):
        connections[using].close_if_unusable_or_obsolete()


class SettleTries:
    """Runs the settles of a runner on database `using`, trying each again on a
    transient error. Shared by its threads; what it remembers (when a settle
    last ran out of tries) it remembers per thread."""

    def __init__(
        self,
        using: str,
        pauses: tuple[float, ...] = PAUSES,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.using = using
        self.pauses = pauses
        #: How a pause is waited; tests replace it.
        self.sleep = sleep
        self._thread = threading.local()

    def run[T](self, step: Callable[[], T], job: Job, settle: str, **fields: Any) -> T:
        """`step()`'s answer, tried again after each pause while it fails on a
        transient error; `GaveUp` when the last try failed so, any other error
        at once. `job` and `settle` (the verb) name the settle in the log,
        with `fields` (a batch's `rows`)."""
        started = time.monotonic()
        gave_up_at = getattr(self._thread, "gave_up_at", None)
        quiet = gave_up_at is not None and started - gave_up_at < QUIET_SECONDS
        tries = 1 if quiet else len(self.pauses) + 1
        for tried in range(1, tries + 1):
            began = time.monotonic()
            try:
                answer = step()
            except Exception as error:
                if not transient(error):
                    raise
                spent_ms = _ms_since(started)
                if tried == tries:
                    self._thread.gave_up_at = time.monotonic()
                    raise GaveUp(error, tried, spent_ms) from error
                pause = self.pauses[tried - 1] * random.uniform(0.5, 1.5)
                log.event(
                    "job_settle_retried",
                    logging.WARNING,
                    outcome="retrying",
                    **job_fields(job),
                    settle=settle,
                    **fields,
                    tried=tried,
                    tries=tries,
                    error=repr(error),
                    try_ms=_ms_since(began),
                    pause_ms=round(pause * 1000),
                )
                self._close()
                self.sleep(pause)
                continue
            if gave_up_at is not None:
                self._thread.gave_up_at = None
            if tried > 1:
                log.event(
                    "job_settle_recovered",
                    outcome="recovered",
                    **job_fields(job),
                    settle=settle,
                    **fields,
                    tries=tried,
                    spent_ms=_ms_since(started),
                )
            return answer
        raise AssertionError("unreachable: the last try returns or raises")

    def _close(self) -> None:
        """Close this thread's connection: the next try opens a new one, where
        the old one may be dead (a server restarted) or mid-failure."""
        with contextlib.suppress(DatabaseError):
            connections[self.using].close()


def _ms_since(start: float) -> int:
    return round((time.monotonic() - start) * 1000)
