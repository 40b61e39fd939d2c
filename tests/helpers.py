"""Small helpers for tests that watch real threads and processes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connections

from jobs.runner import Runner


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, step: float = 0.02) -> bool:
    """Poll `predicate` until it is truthy or `timeout` passes; whether it became true.

    For waiting on another thread or process, never for letting time pass.
    """
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


@contextmanager
def running(runner: Runner) -> Iterator[Runner]:
    """Run `runner.run()` on a background thread for the duration of the block."""

    def target() -> None:
        try:
            runner.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=target, name="test-runner", daemon=True)
    thread.start()
    try:
        yield runner
    finally:
        runner.stop()
        thread.join(10)
        runner.finish(10)
