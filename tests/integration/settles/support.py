"""What the settles' tests share: a handler told how to end, one that always
succeeds, and the jobs they queue, looked at afterwards."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import connection

from jobs import Done, JobHandler, JobSpec, enqueue_many
from jobs.models import Job


def nested(depth: int) -> Any:
    """A list `depth` levels deep: `[[...]]`."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


class Recording(JobHandler):
    """Keeps every run (key, attempt) and every abandon (key, reason)."""

    kind = "test.settles.recording"

    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []
        self.abandoned: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def outcome(self, job: Job) -> Any:
        return Done()

    def run(self, job: Job) -> Any:
        with self._lock:
            self.runs.append((job.key, job.attempts))
        return self.outcome(job)

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned.append((job.key, reason))


class Good(Recording):
    """Succeeds, with a small result."""

    kind = "test.settles.good"

    def outcome(self, job: Job) -> Any:
        return Done({"key": job.key})


class Bad(Recording):
    """Ends as its test sets `ends`: what that returns, or raises."""

    kind = "test.settles.bad"

    def __init__(self) -> None:
        super().__init__()
        self.ends: Callable[[], Any] = Done

    def outcome(self, job: Job) -> Any:
        return self.ends()


def queue_mixed(good: int, bad_keys: list[str]) -> None:
    """`good` jobs of `Good` and one `Bad` job per key, queued together."""
    specs = [JobSpec.now(Good.kind, f"good-{n}") for n in range(good)]
    specs += [JobSpec.now(Bad.kind, key).with_max_attempts(2) for key in bad_keys]
    assert all(enqueue_many(specs)), "every job is queued"


def rows(kind: str) -> dict[str, Job]:
    return {job.key: job for job in Job.objects.filter(kind=kind)}


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a `jobs.log.event` line carries."""
    found: dict[str, Any] = record.__dict__["fields"]
    return found


def vendor() -> str:
    return connection.vendor
