"""Small helpers shared by every layer: waiting on real threads and processes, a runner
on a background thread, and the orders example's API as a client calls it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

from jobs.runner import Runner


def wait_until(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    message: str | None = None,
    *,
    step: float = 0.02,
) -> bool:
    """Poll `predicate` every `step` seconds until it is truthy or `timeout` passes.

    Without a `message`, answers whether it became true, for the caller to
    assert with its own words. With one, it fails itself instead:
    `AssertionError("<message> (waited <timeout>s)")`.

    For waiting on another thread or process, never for letting time pass.
    """
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= give_up:
            if message is not None:
                raise AssertionError(f"{message} (waited {timeout:g}s)")
            return False
        time.sleep(step)
    return True


def start_loop(runner: Runner) -> threading.Thread:
    """`runner.run()` on a thread of its own, as `runjobs` runs it, closing the
    thread's connections when it returns; the caller stops and joins it."""

    def serve() -> None:
        try:
            runner.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=serve, name="test-runner", daemon=True)
    thread.start()
    return thread


@contextmanager
def running(runner: Runner) -> Iterator[Runner]:
    """Run `runner.run()` on a background thread for the duration of the block."""
    thread = start_loop(runner)
    try:
        yield runner
    finally:
        runner.stop()
        thread.join(10)
        runner.finish(10)


# -- the orders example's API, as a client calls it -------------------------------


def create_order(client) -> int:
    answer = client.post("/orders/", data={}, content_type="application/json")
    assert answer.status_code == 201, answer.content
    return int(answer.json()["id"])


def finalize(client, order_id: int) -> dict[str, Any]:
    answer = client.post(f"/orders/{order_id}/finalize")
    assert answer.status_code == 200, answer.content
    return dict(answer.json())


def finished_runs() -> dict[str, tuple[Any, Any]]:
    """Each recorded execution's (start, end) by its job's key (`tests.jobapp`'s
    `Execution`), asserting that each ran once and finished."""
    from tests.jobapp.models import Execution

    runs: dict[str, tuple[Any, Any]] = {}
    for execution in Execution.objects.all():
        assert execution.key not in runs, f"{execution.key} ran once"
        assert execution.finished_at is not None, f"{execution.key} finished"
        runs[execution.key] = (execution.started_at, execution.finished_at)
    return runs
