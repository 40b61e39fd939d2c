"""The `runjobs` process: signals, the loop, and a clean exit.

SIGTERM or SIGINT stops claiming and gives running attempts `grace` seconds to
finish; a second signal exits at once. Whatever is still running then is not
lost: its row stays `running` until the lease expires and a runner takes it.
SIGHUP re-reads the config at once.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

from jobs import log
from jobs.runner.producer import Runner

#: The exit status after a second signal or an expired grace period.
EXIT_INTERRUPTED = 1


def serve(*, using: str | None = None, burst: bool = False, grace: float = 30.0) -> int:
    """Run the loop in this process until signalled (or drained, with `burst`); the exit status."""
    runner = Runner(using=using)
    signals_seen = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            log.event("runner_killed", signal=signal.Signals(signum).name)
            os._exit(EXIT_INTERRUPTED)
        log.event("runner_stopping", signal=signal.Signals(signum).name, grace_seconds=grace)
        runner.stop()

    def on_hangup(signum: int, frame: FrameType | None) -> None:
        log.event("runner_reload", signal="SIGHUP")
        runner.reload()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup)
    finished = False
    try:
        runner.run(burst=burst)
        finished = runner.finish(grace)
    finally:
        runner.close(wait=finished)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if finished else EXIT_INTERRUPTED
