"""What a runner may claim in one pass, as one `jobs.store.admission.Admission`
built from its slots, config, the operator's controls and its handlers' limits.

The store only executes an admission (`jobs.store.limits`); every choice
about what a runner takes is made here, once per pass: the kinds not paused
and the lease each writes, the free slots, the queues served and each capped
queue's room in this runner's slots, and each limited kind's limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobs.config import JobsSettings
from jobs.controls import Controls
from jobs.handlers import JobHandler
from jobs.models import Job
from jobs.runner.attempt import lease_for
from jobs.runner.slots import Slots, lane_share
from jobs.store.admission import Admission


@dataclass(frozen=True, slots=True)
class Admissions:
    """The admissions of one runner (one lane of `runjobs --lanes`): what stays
    the same from pass to pass, kept at start, and one `Admission` a pass."""

    #: The runner's name, which its claims write.
    runner: str
    slots: Slots
    #: The queues it claims from; None for every queue.
    queues: Sequence[str] | None
    #: This lane's share of each capped queue's cap (`lane_shares`).
    queue_caps: Mapping[str, int]
    #: Each kind's `JobHandler.concurrency_limit` (`handler_limits`).
    handler_limits: Mapping[str, int]

    def for_pass(
        self,
        now: datetime,
        free: int,
        settings: JobsSettings,
        budgets: Mapping[str, timedelta],
        controls: Controls,
        settling: Sequence[tuple[Job, Any]],
    ) -> Admission:
        """What a pass at `now` may claim: up to `free` rows of the kinds of
        `budgets` (each attempt's budget, its lease `lease_for` it) and the
        queues served that `controls` leave unpaused, within the limits in
        force and each capped queue's room, the rows this pass settles
        (`settling`) giving theirs back."""
        leases, queues, paused = controls.scope(
            {kind: lease_for(budget, settings.heartbeat) for kind, budget in budgets.items()},
            self.queues,
        )
        return Admission(
            now,
            leases,
            free,
            self.runner,
            queues,
            paused,
            kind_limits=controls.limits(self.handler_limits, leases),
            queue_rooms=rooms(self.queue_caps, self.slots, settling),
        )


def handler_limits(handlers: Iterable[JobHandler]) -> dict[str, int]:
    """The concurrency limit of each kind whose handler sets one."""
    return {
        handler.kind: handler.concurrency_limit
        for handler in handlers
        if handler.concurrency_limit is not None
    }


def lane_shares(caps: Mapping[str, int], lane: int, lanes: int) -> dict[str, int]:
    """Lane `lane`'s share of each queue's cap, the shares adding up to it (as
    `max_concurrent` is shared between lanes: `jobs.runner.slots.lane_share`)."""
    return {queue: lane_share(cap, lane, lanes) for queue, cap in caps.items()}


def rooms(
    caps: Mapping[str, int], slots: Slots, settling: Iterable[tuple[Job, Any]]
) -> dict[str, int]:
    """The slots each capped queue may still take: its cap less the attempts of
    it holding one of `slots`, those this pass settles (`settling`) giving
    theirs back."""
    if not caps:
        return {}
    taken = Counter(attempt.job.queue for attempt in slots.in_flight())
    taken.subtract(job.queue for job, _ in settling)
    return {queue: max(0, cap - taken[queue]) for queue, cap in caps.items()}


def said(queues: Sequence[str] | None, caps: Mapping[str, int]) -> str:
    """The queues served, as `runner_started` logs them: `emails=2,reports`, or `all`."""
    if not queues:
        return "all"
    return ",".join(f"{queue}={caps[queue]}" if queue in caps else queue for queue in queues)
