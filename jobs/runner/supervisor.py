"""`runjobs --processes N`: one supervisor keeping N runner processes alive on one machine.

Why: one Python process runs one thread of Python at a time, so `--lanes`
stops paying once the handlers' own Python is the bottleneck. N processes use
N cores, and a process manager (systemd, Kubernetes, supervisord) still
manages one unit: the supervisor starts the children, replaces one that dies,
and passes the manager's signals on. It opens no database connection and runs
no job; each child is a plain `manage.py runjobs` (its own heartbeat, its own
row on the runners page, which shows it under the supervisor's pid).

The rules:

- Child i is `runjobs` with the supervisor's own options (`--processes`
  left out), its environment adding `JOBS_SUPERVISOR_PID` (this pid) and
  `JOBS_PROCESS_INDEX=i`. Only index 0 calls the handlers' `recover` (and
  reconciles the schedules), as only lane 0 does within a process; its
  replacement keeps index 0. Children run in a process group of their own,
  so a terminal's Ctrl-C reaches them once, through the supervisor.
- A child says when it is ready to claim (`jobs.runner.readiness`: one byte
  down a pipe of its own, once it has read the config, registered and
  recovered), and is logged `runner_process_ready`. A child that exits while
  the supervisor is not stopping, whatever its status, is restarted with the
  same index (`jobs.runner.restarts`): one that had become ready after 0.5 s,
  doubling up to 2 s (a job killed it: jobs are waiting); one that never did
  after 0.5 s, doubling up to 30 s; either 0.5 s again once a child has stayed
  up `STABLE_AFTER` (30 s). A ready child that exits `EXIT_HARD_LIMIT` (a hung
  handler) or `EXIT_RECYCLED` (`--max-jobs-per-process`,
  `--max-memory-per-process`) left on purpose and is replaced at once, its
  backoff unchanged. Each replacement is logged `runner_process_restarted`.
- Only a child that exits before it is ready is a failed start. After
  `GIVE_UP_AFTER` (5) failed starts with no ready child between them, counted
  across all children, the supervisor logs `supervisor_gave_up`, stops the
  others as on SIGTERM and exits `EXIT_GAVE_UP` (4): restarting cannot fix
  what kills every child before it can claim (an import error, a bad
  setting; the process manager or an operator must). What jobs do never
  makes it give up: a handler that kills its process (`os._exit`, a
  segfault, the OOM killer) kills a ready child.
- The first SIGTERM or SIGINT is relayed as SIGTERM to every child; nothing is
  restarted any more; each child has the one `--grace` to finish its attempts,
  and the supervisor waits `grace + STOP_MARGIN` before it SIGKILLs any still
  there. It exits 0 if every child stopped cleanly (`stopped_cleanly`), else
  `EXIT_INTERRUPTED` (1). A
  second one is relayed as a second SIGTERM (each child then exits at once,
  its rows left to their leases); the supervisor waits `STOP_MARGIN` at most
  and exits 1. SIGHUP is relayed as SIGHUP (each child re-reads its config).
- On Linux each child gets SIGTERM if the supervisor itself dies (SIGKILL,
  OOM), so no runner is left behind unsupervised.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import time
from collections.abc import Mapping, Sequence

from django.db import connections

from jobs import log
from jobs.metrics.exposition import Address, Children
from jobs.runner.children import Child, command_line, die_with_parent, shown_status
from jobs.runner.presence import SUPERVISOR_PID_ENV
from jobs.runner.process import EXIT_INTERRUPTED, EXIT_RECYCLED, PROCESS_INDEX_ENV
from jobs.runner.restarts import GIVE_UP_RULE, ON_PURPOSE, Restart, RestartPolicy

#: The most children one supervisor starts (`runjobs --processes`).
MAX_PROCESSES = 64
#: The exit status after children kept failing to start (see `GIVE_UP_AFTER`):
#: apart from 1 (interrupted), 2 (bad arguments) and 3 (a hung handler).
EXIT_GAVE_UP = 4

#: How long past the grace the supervisor waits for children before SIGKILL.
STOP_MARGIN = 5.0
#: The longest the loop sleeps with nothing to do (a signal or a child's exit wakes it at once).
TICK = 1.0

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
RELAYED = (*STOP_SIGNALS, signal.SIGHUP, signal.SIGCHLD)


def stopped_cleanly(status: int) -> bool:
    """Whether a child's exit while the supervisor stops is a clean one: 0;
    recycled as the stop came (its attempts finished); or SIGTERM's default
    action, which only meets a child outside its runner's loop (still setting
    up, or exiting after it), holding no attempt."""
    return status in (0, EXIT_RECYCLED, -signal.SIGTERM)


class Supervisor:
    def __init__(
        self, child_args: Sequence[str], processes: int, grace: float, env: Mapping[str, str]
    ) -> None:
        self.argv = [*command_line(), "runjobs", *child_args]
        self.children = [Child(index) for index in range(processes)]
        self.grace = grace
        self.env = dict(env)
        self.policy = RestartPolicy()
        self.preexec = die_with_parent()
        self.stop_deadline: float | None = None
        self.signals_seen = 0
        self.failed = False  # a child exited non-zero while stopping
        self.gave_up = False
        #: The children's metrics, when they are served (`supervise`).
        self.metrics: Children | None = None

    def start(self, child: Child) -> bool:
        """Start `child`'s process; False if it could not be (counted as a failed start)."""
        env = {
            **self.env,
            SUPERVISOR_PID_ENV: str(os.getpid()),
            PROCESS_INDEX_ENV: str(child.index),
        }
        try:
            child.spawn(self.argv, env, self.preexec, time.monotonic())
        except OSError as error:  # out of processes or memory: like a child that died at once
            log.event("runner_process_start_failed", logging.ERROR, index=child.index, error=error)
            child.old_pid, child.old_status = 0, "not started"
            restart = self.policy.exited(child.index, 0.0, EXIT_INTERRUPTED, ready=False)
            self.settle(child, restart)
            return False
        assert child.process is not None
        log.event("runner_process_started", index=child.index, pid=child.process.pid)
        if self.metrics is not None:
            self.metrics.started(child.index, child.process.pid)
        return True

    def listen(self, child: Child) -> None:
        """Note whether `child` has said it is ready; a ready one ends the run of failed starts."""
        if not child.hear():
            return
        self.policy.started_fine()
        assert child.process is not None
        log.event(
            "runner_process_ready",
            index=child.index,
            pid=child.process.pid,
            startup_seconds=round(time.monotonic() - child.started, 2),
        )

    def settle(self, child: Child, restart: Restart) -> None:
        """Plan `child`'s restart, or give up."""
        if restart.give_up and not self.gave_up:
            self.gave_up = True
            log.event(
                "supervisor_gave_up",
                logging.ERROR,
                rule=GIVE_UP_RULE,
                failed_starts=self.policy.failed_starts,
                exit_status=EXIT_GAVE_UP,
            )
            self.stop(self.grace + STOP_MARGIN)
        elif self.stop_deadline is None:
            child.restart, child.restart_at = restart, time.monotonic() + restart.delay

    def live(self) -> list[Child]:
        return [child for child in self.children if child.process is not None]

    def send(self, signum: int) -> None:
        for child in self.live():
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):  # exited: reaped at the next poll
                child.process.send_signal(signum)

    def on_signal(self, signum: int) -> None:
        if signum == signal.SIGHUP:
            log.event("supervisor_reload", signal="SIGHUP", processes=len(self.live()))
            self.send(signal.SIGHUP)
        elif signum in STOP_SIGNALS:
            self.signals_seen += 1
            name = signal.Signals(signum).name
            if self.signals_seen == 1:
                log.event("supervisor_stopping", signal=name, grace_seconds=self.grace)
                self.stop(self.grace + STOP_MARGIN)
            else:
                log.event("supervisor_killed", signal=name)
                self.failed = True
                self.send(signal.SIGTERM)
                self.stop_deadline = time.monotonic() + STOP_MARGIN

    def stop(self, within: float) -> None:
        for child in self.children:
            child.restart_at = None
        self.send(signal.SIGTERM)
        self.stop_deadline = time.monotonic() + within

    def reap(self) -> None:
        """Note the children that exited, and plan their restarts."""
        now = time.monotonic()
        for child in self.live():
            assert child.process is not None
            status = child.process.poll()
            self.listen(child)  # after the poll: a child that wrote its byte and died is ready
            if status is None:
                continue
            uptime = now - child.started
            child.old_pid, child.old_status = child.process.pid, shown_status(status)
            if self.metrics is not None:
                self.metrics.exited(child.old_pid)
            child.forget()
            stopping = self.stop_deadline is not None
            chosen = child.ready and status in ON_PURPOSE
            log.event(
                "runner_process_exited",
                logging.INFO if stopping or chosen else logging.WARNING,
                index=child.index,
                pid=child.old_pid,
                status=child.old_status,
                ready=child.ready,
                uptime_seconds=round(uptime, 2),
            )
            if stopping:
                self.failed = self.failed or not stopped_cleanly(status)
            else:
                restart = self.policy.exited(child.index, uptime, status, ready=child.ready)
                self.settle(child, restart)

    def restart_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            restart = child.restart
            if child.restart_at is None or child.restart_at > now or restart is None:
                continue
            if self.start(child):
                assert child.process is not None
                log.event(
                    "runner_process_restarted",
                    logging.INFO
                    if restart.reason == ON_PURPOSE[EXIT_RECYCLED]
                    else logging.WARNING,
                    index=child.index,
                    old_pid=child.old_pid,
                    new_pid=child.process.pid,
                    status=child.old_status,
                    reason=restart.reason,
                    delay_seconds=restart.delay,
                )
            if self.stop_deadline is not None:
                return  # gave up

    def wait(self, wakeup: int) -> list[int]:
        """Sleep until a signal (its number, read from the wake-up pipe), a
        child's word, a restart or a tick."""
        now = time.monotonic()
        due = [child.restart_at for child in self.children if child.restart_at is not None]
        if self.stop_deadline is not None:
            due.append(self.stop_deadline)
        timeout = max(0.0, min([now + TICK, *due]) - now)
        listening = {fd: child for child in self.live() if (fd := child.listening()) is not None}
        readable, _, _ = select.select([wakeup, *listening], [], [], timeout)
        for fd in readable:
            if fd in listening:
                self.listen(listening[fd])
        if wakeup not in readable:
            return []
        try:
            return list(os.read(wakeup, 512))
        except BlockingIOError:
            return []

    def kill_stragglers(self, reason: str) -> None:
        for child in self.live():
            assert child.process is not None
            log.event(
                "runner_process_killed",
                logging.WARNING,
                index=child.index,
                pid=child.process.pid,
                reason=reason,
            )
            child.process.kill()
            child.process.wait()
            if self.metrics is not None:
                self.metrics.exited(child.process.pid)
            child.forget()
            self.failed = True

    def run(self) -> int:
        reader, writer = os.pipe()
        os.set_blocking(reader, False)
        os.set_blocking(writer, False)
        previous = {sig: signal.signal(sig, lambda signum, frame: None) for sig in RELAYED}
        previous_fd = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
        try:
            log.event(
                "supervisor_started",
                processes=len(self.children),
                pid=os.getpid(),
                grace_seconds=self.grace,
            )
            for child in self.children:
                if self.stop_deadline is None:
                    self.start(child)
            while self.live() or self.stop_deadline is None:
                for signum in self.wait(reader):
                    self.on_signal(signum)
                self.reap()
                if self.stop_deadline is None:
                    self.restart_due()
                elif time.monotonic() >= self.stop_deadline:
                    self.kill_stragglers("still running when the stop's wait ran out")
        finally:
            self.kill_stragglers("the supervisor failed")  # none left after a clean stop
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(reader)
            os.close(writer)
        status = EXIT_GAVE_UP if self.gave_up else EXIT_INTERRUPTED if self.failed else 0
        log.event("supervisor_stopped", status=status)
        return status


def supervise(
    child_args: Sequence[str],
    processes: int,
    grace: float,
    env: Mapping[str, str] | None = None,
    *,
    metrics: Address | None = None,
    using: str | None = None,
) -> int:
    """Run `processes` children (`manage.py runjobs *child_args`) until signalled; the exit status.

    `child_args` are the options each child gets (the runner's own, never
    `--processes`); `grace` is the `--grace` among them, which the supervisor
    waits out (plus `STOP_MARGIN`) after a stop signal. With `metrics`, one
    endpoint there serves every child's metrics summed, and the table's
    gauges on `using` (`jobs.metrics.exposition.Children`). Call it from the
    main thread: it installs signal handlers.
    """
    if not 1 <= processes <= MAX_PROCESSES:
        raise ValueError(f"processes must be from 1 to {MAX_PROCESSES}, not {processes}")
    connections.close_all()  # the children open their own; this process needs none
    children = Children(metrics, using) if metrics is not None else None
    environment = dict(os.environ if env is None else env)
    if children is not None:
        environment.update(children.environment())
    supervisor = Supervisor(child_args, processes, grace, environment)
    supervisor.metrics = children
    try:
        return supervisor.run()
    finally:
        if children is not None:
            children.close()
