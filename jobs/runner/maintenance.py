"""Start-up work (every handler's `recover`, once, before the loop), what a
config change asks of the queue's own maintenance, and the `abandon` calls
other processes left owed.

A `recover` that raises is logged and the others still run: one broken
handler must not keep the runner from draining everybody else's work.

An `abandon` is owed from a retirement's commit until its call is claimed
(`jobs.retirement`), and the retiring process claims it at once. A mark that
outlives `retirement.GRACE` was left: by a process that died between the two,
or by an operator's cancel in a process with no handler for the kind. Any
runner with a handler for the kind pays it: at its first pass, and then every
`DEBTS_CHECK_SECONDS` (`Debts`), a batch of `DEBTS_BATCH` at a time, on a
thread of its own, so that a slow `abandon` never holds the loop's claims and
renewals, nor its start. The claim lets one payer through however many look
at once.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, connections
from django.utils import timezone

from jobs import lifecycle, log, retirement
from jobs.config import JobsSettings
from jobs.models import Job
from jobs.registry import Registry
from jobs.store import Store

#: How often a runner looks for `abandon` calls left owed: one read of an
#: index that almost always holds nothing (`Store.owed_abandons`).
DEBTS_CHECK_SECONDS = 5.0
#: The most debts one look pays; more wait for the next look.
DEBTS_BATCH = 100


def recover_all(registry: Registry, settings: JobsSettings, using: str | None = None) -> None:
    """Every handler's `recover`, then every lifecycle hook's start
    (`jobs.lifecycle`: the schedules' reconcile among them). The `abandon`
    calls left owed are paid from the first pass on, by `Debts`."""
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
    lifecycle.at_start(registry, settings, using or DEFAULT_DB_ALIAS)


def apply_config_change(
    previous: JobsSettings, current: JobsSettings, registry: Registry, using: str | None = None
) -> None:
    """Tell every lifecycle hook of a config change (retention switched back on
    schedules the sweep again: `jobs.schedules.hook`)."""
    lifecycle.config_changed(previous, current, registry, using or DEFAULT_DB_ALIAS)


def owed(store: Store, registry: Registry, now: datetime) -> list[Job]:
    """Up to `DEBTS_BATCH` of the `abandon` calls owed for `registry`'s kinds
    since before `now` less the grace, oldest first."""
    return store.owed_abandons(registry.kinds(), now - retirement.GRACE, DEBTS_BATCH)


def pay_debts(store: Store, registry: Registry, owed: Sequence[Job]) -> None:
    """Pay each debt of `owed` (`retirement.pay`), unless another process
    claims it first."""
    for job in owed:
        handler = registry.get(job.kind)
        assert handler is not None, "only the registry's kinds are read"
        retirement.pay(store, job, handler, job.last_error, late=True)


class Debts:
    """A runner's look, every `DEBTS_CHECK_SECONDS`, for `abandon` calls left
    owed for the kinds of `registry`; those it finds are paid on a thread of
    their own, one batch at a time (no look while one is being paid).

    The loop calls `look` each pass: the read is one round trip on the loop's
    connection, and only a runner that recovers looks at all (`Runner.recovers`:
    lane 0 of a `runjobs`, or of a supervisor's first child). `close` waits a
    little for a payment under way.
    """

    def __init__(
        self,
        store: Store,
        registry: Registry,
        clock: Callable[[], datetime] = timezone.now,
        *,
        active: bool = True,
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.active = active
        self._next_look = 0.0  # the first pass looks
        self._payer: threading.Thread | None = None

    def look(self) -> None:
        """Find the debts left owed, if a look is due, and start paying them.

        A failed read is logged and tried again at the next look; it never
        fails the loop's pass."""
        if not self.active or time.monotonic() < self._next_look:
            return
        if self._payer is not None and self._payer.is_alive():
            return
        self._next_look = time.monotonic() + DEBTS_CHECK_SECONDS
        try:
            found = owed(self.store, self.registry, self.clock())
        except (DatabaseError, InterfaceError) as error:
            log.event("abandon_debts_unread", logging.WARNING, outcome="failure", error=repr(error))
            return
        if found:
            self._payer = threading.Thread(
                target=self._pay, args=(found,), name="jobs-abandon", daemon=True
            )
            self._payer.start()

    def _pay(self, found: Sequence[Job]) -> None:
        try:
            pay_debts(self.store, self.registry, found)
        finally:
            connections[self.store.using].close()  # this thread's own

    def close(self, timeout: float = 5.0) -> None:
        """Wait up to `timeout` seconds for a payment under way; one still
        running is left to the process's end (its call then counts as made)."""
        if self._payer is not None:
            self._payer.join(timeout)


class Upkeep:
    """What a recovering runner looks after between its passes: the `abandon`
    calls left owed (`Debts`, every `DEBTS_CHECK_SECONDS`) and each lifecycle
    hook's `upkeep`, every `upkeep_seconds` (first one interval after the
    start), both only where `debts` is active. The loop calls `look` each
    pass; most calls compare a clock."""

    def __init__(self, debts: Debts) -> None:
        self.debts = debts
        self.store = debts.store
        self.active = debts.active
        started = time.monotonic()
        #: When each hook with an upkeep is next due.
        self._due = {
            hook: started + hook.upkeep_seconds
            for hook in lifecycle.HOOKS
            if hook.upkeep_seconds is not None
        }

    def look(self) -> None:
        self.debts.look()
        if not self.active:
            return
        for hook, due in self._due.items():
            now = time.monotonic()
            if now >= due:
                self._due[hook] = now + (hook.upkeep_seconds or 0.0)
                hook.upkeep(self.store.using)

    def close(self, timeout: float = 5.0) -> None:
        self.debts.close(timeout)
