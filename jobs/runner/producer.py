"""The runner's loop: how many can I take, take them, hand them on; then sleep
until woken or the poll interval passes.

Each pass counts the free slots (`slots`) and claims that many rows in the
statement and commit that settles the completer's `Done` batch; the executor
builds an attempt for each claim, and the pool runs them. `max_concurrent` is
enforced here, per pass: raising it widens the next claim, lowering it only
stops claiming until running attempts finish. The config row is re-read every
`JOBS_CONFIG_CHECK_SECONDS` (`jobs.runner.ticker`), busy or idle; a change
ends an idle wait at once.
A pass's bookkeeping (that re-read, the `watch` over budgets, leases and hung
handlers, the heartbeat) runs after its claims are handed on, never between a
wake-up and the claim: each is a round trip a new job would wait for.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, connections

from jobs import clock as jobs_clock
from jobs import config as jobs_config
from jobs import controls, live_config, log, notifier, observers, wakeup
from jobs.config import JobsSettings
from jobs.metrics.tally import forget_runner, runner_gauges, tally
from jobs.registry import Registry
from jobs.registry import registry as default_registry
from jobs.runner import admission, startup
from jobs.runner.attempt import Attempt
from jobs.runner.completer import Completer
from jobs.runner.executor import Executor
from jobs.runner.heartbeat import Heartbeat
from jobs.runner.maintenance import Debts, Upkeep, apply_config_change, recover_all
from jobs.runner.pass_report import PassReport
from jobs.runner.pool import WorkerPool, forget_queries
from jobs.runner.presence import BEAT, Presence
from jobs.runner.slots import Slots
from jobs.runner.ticker import ConfigTicker
from jobs.runner.watch import Watch
from jobs.store import for_database, limits


class Runner:
    """Claims and runs jobs for the handlers in `registry`, on database `using`.

    `run()` is what `runjobs` calls; tests drive the same object in-process.

    `lane` of `lanes`: one of several runners a process runs side by side
    (`runjobs --lanes`), each with its own connection and its share of
    `max_concurrent` (see `slots`), so one lane's statement is in the
    database while another's attempts run. Lane 0 alone calls `recover`.

    Its parts: `slots` (the attempts in flight), `completer` (every settle),
    `executor` (each attempt, on the `pool`'s threads) and `presence` (its row).
    """

    def __init__(
        self,
        *,
        using: str | None = None,
        registry: Registry | None = None,
        clock: Callable[[], datetime] | None = None,
        settings: Callable[[], JobsSettings] | None = None,
        lane: int = 0,
        lanes: int = 1,
        queues: Sequence[str] | None = None,
        queue_caps: Mapping[str, int] | None = None,
        recover: bool = True,
    ) -> None:
        if not 0 <= lane < lanes:
            raise ValueError(f"lane {lane} of {lanes}: lanes are numbered from 0")
        self.lane, self.lanes = lane, lanes
        self.recovers = recover and lane == 0
        #: The queues this runner claims from; None for every queue.
        self.queues = tuple(queues) if queues else None
        #: This lane's share of each queue's cap (`runjobs --queue NAME=N`).
        self.queue_caps = admission.lane_shares(queue_caps or {}, lane, lanes)
        self.using = using or DEFAULT_DB_ALIAS
        self.registry = registry if registry is not None else default_registry
        #: Each kind's `JobHandler.concurrency_limit` (class attributes: read once).
        self.handler_limits = admission.handler_limits(self.registry)
        self.clock = clock or jobs_clock.of(self.using)  # the database's time (`jobs.clock`)
        self.settings = settings or live_config.LiveConfig(self.using)
        self.store = for_database(self.using)
        self.presence = Presence(self.using, self.clock, lane, lanes)
        self._listener: wakeup.Listener | None = None
        #: Marks the config row due for a re-read (`jobs.runner.ticker`).
        self.ticker = ConfigTicker()
        self.doorbell = wakeup.doorbell.subscribe()
        self.stopping = threading.Event()
        self.slots = Slots(self.doorbell, lane, lanes)
        #: What each pass may claim (`jobs.runner.admission`).
        self.admissions = admission.Admissions(
            self.presence.name, self.slots, self.queues, self.queue_caps, self.handler_limits
        )
        self.completer = Completer(self.store, self.slots, self.clock)
        self._hooked = self.completer.batches.hooked  # checked each pass: no call when empty
        self.executor = Executor(self.registry, self.completer, self.clock)
        self.pool: WorkerPool[Attempt] = WorkerPool(self.executor.execute, name="jobs-worker")
        self.watch = Watch(self.store, self.slots, self.completer)
        self.upkeep = Upkeep(Debts(self.store, self.registry, self.clock, active=self.recovers))
        self.heartbeat = Heartbeat(
            self.store, self.slots, self.clock, lambda: self._current, self._limited_kinds
        )
        #: Called when a hung attempt makes this runner give up; `serve` makes
        #: it stop every lane of the process.
        self.on_hung: Callable[[], None] = self.stop
        #: Called once it has registered (and recovered) and is about to claim:
        #: `serve` tells a supervisor the process is ready (`jobs.runner.readiness`).
        self.on_ready: Callable[[], None] = lambda: None
        #: Set when the config row must be read again before the next claim:
        #: a reload request (SIGHUP, a notice) or a save in this process.
        self._config_stale = threading.Event()
        self._config_generation = live_config.generation()
        #: The operator's controls (paused queues and kinds, limits set in the
        #: database), read with the config row.
        self.read_controls = controls.LiveControls(self.using)
        self.controls = controls.Controls()
        #: Passes completed so far: how a test knows the runner has looked and gone idle.
        self.passes = 0
        #: Whether the metrics' notes wait for this runner's passes (`run` to `close`).
        self._tallying = False
        try:
            self._current = self.settings()
            self.controls = controls.applied(self.controls, self.read_controls())
        except (DatabaseError, InterfaceError):
            # The database is not answering yet: start from the initial config;
            # `run()` waits for the database and reads the row before claiming.
            connections[self.using].close()
            self._current = jobs_config.initial()

    # -- lifecycle -------------------------------------------------------------

    def run(self, *, burst: bool = False) -> None:
        """Recover, then loop until `stop()` (or, with `burst`, until nothing is ready)."""
        log.event(
            "runner_started",
            kinds=",".join(self.registry.kinds()) or "-",
            queues=admission.said(self.queues, self.queue_caps),
            burst=burst,
        )
        if not self._start_up():
            return  # stopped before the database ever answered
        if not self._tallying:
            self._tallying = True
            tally.join()  # left by `close`
        listens = not burst and notifier.for_database(self.using).wakes_other_processes
        if listens and self._listener is None:
            self._listener = wakeup.Listener(
                self.using, on_work=self.doorbell.set, on_config=self.reload
            )
            self._listener.start()
        self.ticker.start()
        self.heartbeat.start()
        if self.recovers:
            recover_all(self.registry, self._current, self.using)
        self.on_ready()
        flying = False  # attempts claimed or in flight since the burst last looked
        while not self.stopping.is_set():
            self.doorbell.clear()
            try:
                claimed, free = self.run_pass()
            except (DatabaseError, InterfaceError) as error:
                log.event("runner_database_error", logging.ERROR, outcome="failure", error=error)
                connections[self.using].close()
                self.doorbell.wait(self._current.poll_interval.total_seconds())
                continue
            except Exception as error:
                # A bug, or something in a row nobody foresaw: log it and keep
                # the loop alive, so the runner goes on serving the other rows
                # rather than exit. A burst (tests, scripts) reports it.
                log.event(
                    "runner_pass_failed",
                    logging.ERROR,
                    outcome="failure",
                    error=repr(error),
                    traceback=traceback.format_exc(),
                )
                if burst:
                    raise
                self.doorbell.wait(self._current.poll_interval.total_seconds())
                continue
            if burst and not claimed and not self.in_flight():
                # A burst ends at a pass that claims nothing with nothing in
                # flight. When attempts were in flight before it, their
                # settles may have made work ready after its claim (a
                # workflow's step released), so one more pass looks first.
                if flying:
                    flying = False
                    continue
                break
            flying = True
            if claimed and claimed == free:
                continue  # a full claim: more may be ready now
            self._idle()

    def _start_up(self) -> bool:
        """Read the config row and register this runner, waiting for the database
        (`jobs.runner.startup`); False if stopped before it ever answered."""

        def register() -> None:
            self._refresh(force=True)
            self.presence.register(
                self.registry.kinds(), self.slots.share(self._current), self.queues
            )

        return startup.until_answered(register, self.stopping, self.using)

    def reload(self) -> None:
        """Re-read the config now (SIGHUP, a notice). Safe from a signal handler."""
        self._config_stale.set()
        self.doorbell.set()

    def stop(self) -> None:
        """Stop claiming; attempts already running go on. Safe from a signal handler."""
        self.stopping.set()
        self.doorbell.set()

    def finish(self, grace: float) -> bool:
        """Wait up to `grace` seconds for running attempts (still watched: timed
        out, renewed); True if none is left, else the caller may `release`."""
        give_up = time.monotonic() + grace
        self.slots.stop_gathering()  # every finish rings from here on
        while self.in_flight():
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                break
            self.doorbell.clear()
            self.completer.settle_batch(self.clock())
            self._keep_watch(self.clock())
            # Still here, running its attempts: not to be shown gone meanwhile.
            with contextlib.suppress(DatabaseError, InterfaceError):  # the next beat tells
                self.presence.beat(len(self.in_flight()), self.slots.share(self._current))
            if self.in_flight():
                self.doorbell.wait(
                    min(remaining, self.watch.wait_seconds(self.clock(), self._current), BEAT)
                )
        tally.flush()
        left = self.in_flight()
        if left:
            log.event(
                "runner_grace_expired",
                logging.WARNING,
                outcome="released",
                running=len(left),
            )
        return not left

    def release(self) -> None:
        """Hand back the attempts still running when the process gives up on
        them (its grace ran out): due now, on the record as released."""
        for attempt in self.in_flight():
            self.completer.released(attempt, self.clock())

    def close(self, *, wait: bool = True) -> None:
        """Release the worker threads and this runner's doorbell.

        With `wait=False` (attempts are still running after the grace period)
        threads busy in a handler are left behind rather than waited for.
        """
        try:
            self.completer.settle_batch(self.clock())
        except (DatabaseError, InterfaceError) as error:
            log.event("runner_settle_failed", logging.ERROR, error=error)
        self.pool.close(timeout=5.0 if wait else 0.0)
        self.upkeep.close(timeout=5.0 if wait else 0.0)
        self.heartbeat.stop()
        if self._tallying:
            self._tallying = False
            tally.leave()
        forget_runner(self.presence.name)
        wakeup.doorbell.unsubscribe(self.doorbell)
        self.ticker.stop()
        if self._listener is not None:
            self._listener.stop(5)
        try:
            self.presence.remove()
        except (DatabaseError, InterfaceError) as error:
            log.event("runner_presence_not_removed", logging.WARNING, error=error)
        log.event("runner_stopped", passes=self.passes)

    def drain(self, timeout: float = 30.0) -> None:
        """Run a burst (everything ready now, then return) and wait for every attempt.

        For tests and scripts; raises TimeoutError if attempts are still
        running after `timeout` seconds.
        """
        self.run(burst=True)
        if not self.finish(timeout):
            raise TimeoutError(f"{len(self.in_flight())} attempts still running after {timeout}s")

    # -- one pass --------------------------------------------------------------

    def run_pass(self) -> tuple[int, int]:
        """One pass now (`pass_once`): how many rows were claimed and how many
        slots were free."""
        report = self.pass_once(self.clock())
        return len(report.claimed), report.free

    def pass_once(self, now: datetime) -> PassReport:
        """Time out overrunning attempts, then claim up to the free slots, settling
        the completer's `Done` batch in the same statement, and hand the claims
        on, at `now`; what it did.
        """
        forget_queries()  # DEBUG's query log: see `forget_queries`
        settings = self._refresh()
        reaped = self.watch.reap(now)
        self.slots.gather()
        if self._hooked:
            self.completer.settle_hooked(now)
        batch = self.completer.done_batch()
        running = self.slots.taken() - len(batch)
        share = self.slots.share(settings)
        free = max(0, share - running)
        budgets = self.executor.budgets(settings, now)
        admitted = self.admissions.for_pass(now, free, settings, budgets, self.controls, batch.rows)
        won, claims = self.completer.settle_done(
            batch, now, lambda rows: limits.settle_and_claim(self.store, rows, admitted)
        )
        started = self.executor.attempts(claims, settings, budgets, now)
        self.slots.started(started)
        self.pool.submit_many(started)
        self.passes += 1
        # Bookkeeping, now that the claimed attempts are running.
        observers.started([attempt.job for attempt in started], now)
        self._keep_watch(now, reap=False)  # reaped before the claim
        self.presence.beat(running + len(started), share)
        self._measured(running + len(started), share)
        self.upkeep.look()
        if self.ticker.due.is_set():
            self._refresh(force=True)
        return PassReport(reaped, won, started, free)

    def _measured(self, held: int, share: int) -> None:
        """This runner's slots as the pass left them (`jobs.metrics.tally`)."""
        runner_gauges(self.presence.name, held, max(0, share - held))

    def in_flight(self) -> list[Attempt]:
        """The attempts holding a slot: running, or awaiting their settle."""
        return self.slots.in_flight()

    def _limited_kinds(self) -> frozenset[str]:
        return frozenset(self.handler_limits).union(self.controls.kind_limits)

    def _keep_watch(self, now: datetime, *, reap: bool = True) -> None:
        """Time out, and give up on a hung handler (`jobs.runner.watch`)."""
        if reap:
            self.watch.reap(now)
        if self.watch.hung(now):
            self.on_hung()

    def _refresh(self, *, force: bool = False) -> JobsSettings:
        """The config in force: read again (with the operator's controls) when
        stale or `force`; tell maintenance when it changed."""
        generation = live_config.generation()
        if not (force or self._config_stale.is_set() or generation != self._config_generation):
            return self._current
        self._config_stale.clear()
        self.ticker.due.clear()
        self._config_generation = generation
        previous, self._current = self._current, self.settings()
        self.controls = controls.applied(self.controls, self.read_controls())
        if self._current != previous:
            apply_config_change(previous, self._current, self.registry, self.using)
        return self._current

    def _idle(self) -> None:
        """Wait for the doorbell, a config change or the poll interval, whichever is first.

        Elapsed time is counted from the waits themselves rather than a clock,
        so a frozen clock in tests cannot stretch or shrink it.
        """
        if self.slots.stop_gathering():
            return  # attempts finished while the pass ran: settle them now
        waited = 0.0
        while not self.stopping.is_set():
            remaining = self._current.poll_interval.total_seconds() - waited
            step = min(
                remaining, self.ticker.seconds, self.watch.wait_seconds(self.clock(), self._current)
            )
            if step <= 0 or self.doorbell.wait(step):
                return
            waited += step
            before = (self._current, self.controls)
            try:
                if (self._refresh(force=True), self.controls) != before:
                    return
                self._keep_watch(self.clock())
                self.presence.beat(len(self.in_flight()), self.slots.share(self._current))
            except (DatabaseError, InterfaceError):
                return  # the next pass reports it
