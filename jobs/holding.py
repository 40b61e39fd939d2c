"""Who holds a running job, and whether that holder is still there.

A claim writes its runner's name on the row (`Job.claimed_by`); each runner
heartbeats its `RunnerProcess` row. A running job whose runner has not been
heard from for `RunnerProcess.STALE_AFTER` is held by nobody: its attempt
died with the runner and the row waits for its lease to expire before
another runner reclaims it. Screens say so at once ("runner gone") instead of
showing a healthy lease, and count such jobs, with those whose lease has
already expired, as *stuck* rather than running.

Read once per screen (`Holders.read`: one query over the runner rows), then
asked per job or turned into a filter for counting. A row claimed before the
runner wrote its name (`claimed_by` NULL, from an older version) is judged by
its lease alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q
from django.utils import timezone

from jobs.models import Job, RunnerProcess, State

#: Why a running job is stuck, as every screen says it.
RUNNER_GONE = "runner gone"
LEASE_EXPIRED = "lease expired"


@dataclass(frozen=True)
class Holders:
    """The runners heard from recently, as of `now`."""

    now: datetime
    #: Names (as `Job.claimed_by` holds them) of runners whose last heartbeat
    #: is within `RunnerProcess.STALE_AFTER` of `now`.
    live: frozenset[str]

    @classmethod
    def read(cls, using: str | None = None, now: datetime | None = None) -> Holders:
        now = now or timezone.now()
        fresh = RunnerProcess.objects.using(using or DEFAULT_DB_ALIAS).filter(
            heartbeat_at__gte=now - RunnerProcess.STALE_AFTER
        )
        return cls(now=now, live=frozenset(runner.name for runner in fresh))

    def stuck(self, job: Job) -> str:
        """Why `job` is running with nobody working on it, or "" when it is
        not (not running, or held by a live runner on a lease still good)."""
        if job.state != State.RUNNING:
            return ""
        if job.claimed_by is not None and job.claimed_by not in self.live:
            return RUNNER_GONE
        if job.lease_expires_at is not None and job.lease_expires_at <= self.now:
            return LEASE_EXPIRED
        return ""

    def stuck_rows(self) -> Q:
        """The running rows `stuck` names, as a filter."""
        gone = Q(claimed_by__isnull=False) & ~Q(claimed_by__in=sorted(self.live))
        return Q(state=State.RUNNING) & (gone | Q(lease_expires_at__lte=self.now))
