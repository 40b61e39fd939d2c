"""What the bad-rows tests share: their kind, the instants at either end of what a
datetime holds, a recording handler, and rows queued and reloaded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobs import Done, JobHandler, JobSpec, enqueue
from jobs.models import Job

KIND = "test.bad_rows"
#: The latest instant a datetime holds, and the earliest.
LATEST = datetime.max.replace(tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)
LEASE = timedelta(minutes=5)


class Recording(JobHandler):
    """Keeps every run and every abandon; each outcome comes from `outcome`."""

    kind = KIND

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.abandoned: list[tuple[str, str]] = []

    def outcome(self, job: Job) -> Any:
        return Done()

    def run(self, job: Job) -> Any:
        self.runs.append(job.key)
        return self.outcome(job)

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned.append((job.key, reason))


def queue(key: str, **fields: Any) -> Job:
    assert enqueue(JobSpec.now(KIND, key).with_payload({"n": key}), **fields), f"{key} queued"
    return Job.objects.get(kind=KIND, key=key)


def reloaded(job: Job) -> Job:
    return Job.objects.get(id=job.id)


class _Sink:
    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass
