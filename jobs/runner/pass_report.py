"""What one pass of a runner did (`Runner.pass_once`): what a test or a
supervisor of the loop reads, rather than the runner's parts."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from jobs.runner.attempt import Attempt


class PassReport(NamedTuple):
    """One pass: the attempts it timed out, the `Done` rows it settled, the
    attempts it claimed and handed on, and the slots that were free (a named
    tuple: one is built each pass, and a frozen dataclass costs several times
    more to build)."""

    #: Attempts past their budget, timed out before the claim.
    reaped: list[Attempt]
    #: The ids of the `Done` batch's rows whose settle won.
    settled: set[uuid.UUID]
    #: The attempts built for the rows claimed, in claim order.
    claimed: list[Attempt]
    #: The slots free for the claim.
    free: int
