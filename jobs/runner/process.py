"""The `runjobs` process: signals, the loop, and a clean exit.

SIGTERM or SIGINT stops claiming and gives running attempts `grace` seconds to
finish. Whatever still runs when the grace runs out is released: its row goes
back to the queue, due now, with the attempt on its record, and the process
exits (taking those threads with it). A hung handler (`jobs.runner.watch`)
stops every lane the same way, and the process exits `EXIT_HARD_LIMIT`.
A second signal exits at once, writing nothing: its rows stay `running`
until their leases expire and a runner takes them.
SIGHUP re-reads the config at once.

Under a supervisor the process says when it is ready to claim
(`jobs.runner.readiness`), once every lane has registered and lane 0 has
recovered. With `max_jobs` or `max_memory_mb` it recycles itself
(`jobs.runner.recycling`): it stops claiming as on SIGTERM, finishes its
attempts within `grace`, and exits `EXIT_RECYCLED` to be started afresh.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from types import FrameType

from django.db import connections

from jobs import log
from jobs.metrics.exposition import Address, serve_process
from jobs.runner import connection_budget
from jobs.runner.producer import Runner
from jobs.runner.readiness import Announcer
from jobs.runner.recycling import Recycling

#: The exit status after a second signal or an expired grace period.
EXIT_INTERRUPTED = 1
#: The exit status after a hung attempt outlived its budget by `hard_kill_after`:
#: the process left so that a supervisor (or a process manager) starts a fresh one.
EXIT_HARD_LIMIT = 3
#: The exit status of a process that recycled itself (`--max-jobs-per-process`,
#: `--max-memory-per-process`) after finishing its attempts: not a failure,
#: but non-zero, so that a process manager restarting on failure starts a
#: fresh one; a supervisor does at once. (4 is the supervisor's own.)
EXIT_RECYCLED = 5

#: Set by `runjobs --processes` for each child, beside the supervisor's pid
#: (`presence.SUPERVISOR_PID_ENV`): the child's index; only index 0 calls `recover`.
PROCESS_INDEX_ENV = "JOBS_PROCESS_INDEX"


def recovers() -> bool:
    """Whether this process calls the handlers' `recover`: every process on
    its own, and only the first child of a supervisor."""
    return os.environ.get(PROCESS_INDEX_ENV, "0") == "0"


def serve(
    *,
    using: str | None = None,
    burst: bool = False,
    grace: float = 30.0,
    lanes: int = 1,
    queues: Sequence[str] | None = None,
    queue_caps: Mapping[str, int] | None = None,
    metrics: Address | None = None,
    max_jobs: int | None = None,
    max_memory_mb: int | None = None,
) -> int:
    """Run the loop in this process until signalled (or drained, with `burst`,
    or recycled, with `max_jobs` or `max_memory_mb`); the exit status.

    With `metrics`, the process's metrics are served there while it runs
    (`jobs.metrics.exposition`); `MetricsUnavailable` if it cannot listen,
    before any runner starts.

    With `lanes` above 1, that many runners share the process (see `Runner`):
    lane 0 on this thread, the others on threads of their own, each on its
    own connection. A signal stops them all; the grace period is shared.

    Before they run, the process's connection budget is checked against what
    the server has left (`connection_budget.check`), and logged.
    """
    endpoint = serve_process(metrics, using) if metrics is not None else None
    runners = [
        Runner(
            using=using,
            lane=lane,
            lanes=lanes,
            queues=queues,
            queue_caps=queue_caps,
            recover=recovers(),
        )
        for lane in range(lanes)
    ]

    def stop_all() -> None:
        for runner in runners:
            runner.stop()

    ready = Announcer.from_environment(lanes)
    for runner in runners:
        runner.on_hung = stop_all
        runner.on_ready = ready.lane_ready
    recycling = Recycling(max_jobs, max_memory_mb, on_due=stop_all)
    connection_budget.check(runners[0].using, lanes=lanes, burst=burst, metrics=metrics is not None)
    signals_seen = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            log.event("runner_killed", signal=signal.Signals(signum).name)
            os._exit(EXIT_INTERRUPTED)
        log.event("runner_stopping", signal=signal.Signals(signum).name, grace_seconds=grace)
        for runner in runners:
            runner.stop()

    def on_hangup(signum: int, frame: FrameType | None) -> None:
        log.event("runner_reload", signal="SIGHUP")
        for runner in runners:
            runner.reload()

    def run_lane(runner: Runner) -> None:
        try:
            runner.run(burst=burst)
        finally:
            connections.close_all()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup)
    others = [
        threading.Thread(target=run_lane, args=(runner,), name=f"jobs-lane-{runner.lane}")
        for runner in runners[1:]
    ]
    finished = hung = False
    try:
        recycling.connect()
        for thread in others:
            thread.start()
        runners[0].run(burst=burst)
        for thread in others:
            thread.join()
        give_up = time.monotonic() + grace
        finished = all([runner.finish(max(0.0, give_up - time.monotonic())) for runner in runners])
    finally:
        for runner in runners:
            runner.stop()
        for thread in others:
            if thread.is_alive():  # lane 0 raised: the others stop too
                thread.join()
        hung = any(runner.watch.hung_attempt is not None for runner in runners)
        for runner in runners:
            if not finished:
                runner.release()
            runner.close(wait=finished and not hung)  # a hung thread is never waited for
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        recycling.close()
        if endpoint is not None:
            endpoint.close()
    if hung:
        return EXIT_HARD_LIMIT
    if recycling.reason is not None and not signals_seen:  # asked to stop: it did
        return EXIT_RECYCLED
    return 0 if finished else EXIT_INTERRUPTED
