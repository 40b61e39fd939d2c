"""The `RunnerProcess` row: who is running right now, as each runner reports itself."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.db import models

#: The longest runner name a row keeps (a host name is at most 253 characters).
RUNNER_NAME_MAX_LENGTH = 300


class RunnerProcess(models.Model):
    """One live `runjobs` process, as it last reported itself.

    Written by the runner's heartbeat every few seconds and deleted on a clean
    exit, so a row whose heartbeat has gone stale is a runner that died: its
    running jobs stay `running` until their leases expire and another runner
    takes them.
    """

    #: How often a runner reports itself (its presence; a claim's lease is
    #: renewed at `heartbeat_seconds`, a config key, by another beat).
    HEARTBEAT = timedelta(seconds=5)
    #: Heartbeats a runner may miss before it is gone: one late beat is a slow
    #: pass; a second in a row is a process that stopped.
    MISSED_BEATS = 2
    #: A runner silent this long is gone, at once, on every screen: it runs
    #: nothing (its attempts wait for their leases to run out), its kinds are
    #: handled by nobody, and it is listed apart from the live ones.
    STALE_AFTER = MISSED_BEATS * HEARTBEAT
    #: A gone runner's row is deleted (forgotten) this long after its last
    #: heartbeat, by any live runner's beat (`jobs.runner.presence`): long
    #: enough for an operator to see that it died, and why its jobs were taken
    #: over; short enough that the list is of runners, not of past deploys.
    FORGET_AFTER = timedelta(minutes=10)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    hostname = models.CharField(max_length=255)
    pid = models.IntegerField()
    version = models.CharField(max_length=50)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    max_concurrent = models.PositiveIntegerField(help_text="Its effective limit right now.")
    running = models.PositiveIntegerField(default=0, help_text="Attempts running right now.")
    kinds = models.JSONField(default=list, help_text="The kinds it has handlers for.")
    queues = models.JSONField(
        null=True,
        blank=True,
        help_text="The queues it claims from (runjobs --queue); empty for every queue.",
    )
    lane = models.PositiveSmallIntegerField(
        default=0, help_text="Which of its process's claiming loops this is, from 0."
    )
    lanes = models.PositiveSmallIntegerField(
        default=1, help_text="How many claiming loops its process runs (runjobs --lanes)."
    )
    supervisor_pid = models.IntegerField(
        null=True,
        blank=True,
        help_text="The pid of the `runjobs --processes` supervisor that started its "
        "process, on the same host; empty for a runner started on its own.",
    )
    clock_offset_ms = models.IntegerField(
        null=True,
        blank=True,
        help_text="How far the database's clock was ahead of this runner's (negative: "
        "behind) at its last heartbeat, in milliseconds; the runner corrects its own time "
        "by it. Empty where the database shares the runner's clock (SQLite).",
    )

    class Meta:
        verbose_name = "runner"
        ordering = ["hostname", "supervisor_pid", "pid", "lane"]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        """How the runners page names it, and what its claims write in `Job.claimed_by`."""
        return runner_name(self.hostname, self.pid, self.lane, self.lanes)

    @property
    def lane_label(self) -> str:
        """`lane 1 of 2` for a process that runs several lanes; '' for one that runs one."""
        return lane_label(self.lane, self.lanes)

    def is_gone(self, now: datetime) -> bool:
        """Silent for `STALE_AFTER`: `MISSED_BEATS` heartbeats missed."""
        return self.heartbeat_at < now - self.STALE_AFTER

    def running_now(self, now: datetime) -> int:
        """Its attempts running now: what it last said, or 0 once it is gone
        (whatever it ran died with it, or is another runner's by now)."""
        return 0 if self.is_gone(now) else self.running


def lane_label(lane: int, lanes: int) -> str:
    """`lane 1 of 2` for a process that runs several lanes; '' for one that runs one."""
    return f"lane {lane} of {lanes}" if lanes > 1 else ""


def runner_name(hostname: str, pid: int, lane: int = 0, lanes: int = 1) -> str:
    """A runner's name: `host:pid`, and its lane where its process runs several."""
    return " ".join(filter(None, [f"{hostname}:{pid}", lane_label(lane, lanes)]))[
        :RUNNER_NAME_MAX_LENGTH
    ]


# The routing models (concurrency limits, operator controls), kept apart for size.
