"""What the runner's tests share: test handlers, and small ways to look at what they did.

These tests drive `jobs.runner.Runner` directly, with handlers defined here or in
each test and registered into a fresh registry, so each test sees only its own
kinds. The runner works on real threads with their own connections, so every
test commits for real (`transaction=True`). Time is frozen with freezegun where
a rule is about time; the one exception is the async budget, which must really
cancel.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs import Done, Failed, JobHandler, Reschedule, Retry
from jobs.models import Job
from jobs.registry import Registry

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
#: How long a test waits for another thread before calling it hung.
WAIT = 10


def install[H: JobHandler](registry: Registry, handler_class: type[H]) -> H:
    """Register `handler_class` and return the one instance the runner will call."""
    registry.register(handler_class)
    handler = registry.get(handler_class.kind)
    assert isinstance(handler, handler_class)
    return handler


def the_job(kind: str, key: str = "k") -> Job:
    return Job.objects.get(kind=kind, key=key)


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "jobs" and getattr(r, "event", None) == name]


class Recording(JobHandler):
    """Base for test handlers: keeps every run and every abandon."""

    kind = "test.recording"

    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []
        self.abandoned: list[tuple[str, str]] = []

    def outcome(self, job: Job) -> Any:
        return Done()

    def run(self, job: Job) -> Any:
        self.runs.append((job.key, job.attempts))
        return self.outcome(job)

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned.append((job.key, reason))


class Succeeds(Recording):
    kind = "test.succeeds"


class Retries(Recording):
    kind = "test.retries"
    reason = "the upstream answered 503"

    def outcome(self, job: Job) -> Any:
        return Retry(self.reason)


class Fails(Recording):
    kind = "test.fails"
    reason = "the CA refused the order: badCSR"

    def outcome(self, job: Job) -> Any:
        return Failed(self.reason)


class Reschedules(Recording):
    kind = "test.reschedules"
    delay = timedelta(minutes=15)

    def outcome(self, job: Job) -> Any:
        return Reschedule(self.delay)


class Blocks(Recording):
    """Runs until the test releases it; counts how many attempts run at once."""

    kind = "test.blocks"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Event()
        self._lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0
        self.changed = threading.Condition(self._lock)

    def run(self, job: Job) -> Any:
        with self._lock:
            self.runs.append((job.key, job.attempts))
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.changed.notify_all()
        self.started.set()
        try:
            assert self.release.wait(WAIT), "the test released the handler"
            return Done()
        finally:
            with self._lock:
                self.running -= 1
                self.changed.notify_all()

    def wait_running(self, count: int) -> bool:
        with self._lock:
            return self.changed.wait_for(lambda: self.running >= count, WAIT)
