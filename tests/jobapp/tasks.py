"""`django.tasks` functions for the backend's tests (autodiscovered by `jobs`)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

from django.tasks import TaskContext, task

from jobs.tasks import PermanentFailure


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@task
def explode(message: str) -> None:
    raise ValueError(message)


@task
def refuse(message: str) -> None:
    raise PermanentFailure(message)


@task(takes_context=True)
def which_attempt(context: TaskContext[Any, Any], fail_until: int) -> int:
    if context.attempt < fail_until:
        raise RuntimeError(f"attempt {context.attempt} fails on purpose")
    return context.attempt


@task
async def async_double(n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


@task
def escape(how: str) -> None:
    """Ends with a BaseException that is not an Exception, as `how` names it."""
    if how == "exit":
        sys.exit(1)
    raise KeyboardInterrupt("a task interrupting itself")


@task(takes_context=True)
def fail_each(context: TaskContext[Any, Any]) -> None:
    """Fails every attempt, saying which."""
    raise ValueError(f"attempt {context.attempt} fails")


#: Set by a test to let `wait_for_release` return.
RELEASE = threading.Event()


@task
def wait_for_release() -> str:
    """Runs until the test sets `RELEASE` (at most 10 s): an attempt a test can overrun."""
    RELEASE.wait(10)
    return "released"


# The tasks the conformance tests (tests/integration/tasks/test_conformance.py)
# run: each the shape of one an upstream suite runs, written for ours.


@task
def fail_with_value_error() -> None:
    raise ValueError("This task failed due to ValueError")


@task
def fail_with_nested_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task
def return_a_function() -> Any:
    """Returns what JSON cannot hold (nor pickle, for that matter)."""
    return lambda: True


@task(takes_context=True)
def own_result_id(context: TaskContext[Any, Any]) -> str:
    return context.task_result.id


@task
def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds
