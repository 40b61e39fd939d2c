"""A runner's slots: the attempts it has in flight, and the gathering that lets
the attempts of one pass free their slots together.

An attempt holds a slot from the pass that claims it until its row is settled
(a `Done` until the next pass's settle, whatever else until the worker's own
settle), so `max_concurrent` bounds claimed-and-unsettled rows, not threads.
Each event in an attempt's life is one verb here, called by whoever sees it:
the producer `started` a pass's attempts, the completer says an attempt
`stopped` running (which rings the loop) and when rows are `settled` (which frees
their slots), and the loop `gather`s before a pass and `stop_gathering`s when
it stops waiting.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from jobs.config import JobsSettings
from jobs.runner.attempt import Attempt

#: How long a pass waits for one more of the attempts the previous pass started
#: (see `Slots.gather`).
GATHER_SECONDS = 0.002


def lane_share(total: int, lane: int, lanes: int) -> int:
    """Lane `lane`'s share of `total` split between `lanes` lanes: the shares
    add up to it, the first lanes taking one more of what does not divide."""
    share, left_over = divmod(total, lanes)
    return share + (1 if lane < left_over else 0)


class _Gathering:
    """The attempts one pass started, for the next pass to wait for (`Slots.gather`).

    While it is `quiet`, their finishes do not ring the doorbell, except the
    last: a pass of 8 short attempts then wakes the loop once, not 8 times,
    and each wake-up of a thread costs the runner more CPU than a no-op job.
    It stops being quiet when the loop stops waiting for them (the gather
    ends, or the loop goes idle), so a finish is never left unseen.
    """

    __slots__ = ("finished", "pending", "quiet")

    def __init__(self, attempts: list[Attempt]) -> None:
        self.pending = set(attempts)
        #: How many of them have finished so far: the gather's sign of progress.
        self.finished = 0
        self.quiet = True


class Slots:
    """The slots of one runner (one lane of `runjobs --lanes`), and the doorbell
    its finishing attempts ring.

    Safe to call from the loop and the worker threads at once; every method
    holds the lock only for a few dictionary operations.
    """

    def __init__(self, doorbell: threading.Event, lane: int = 0, lanes: int = 1) -> None:
        self._doorbell = doorbell
        self._lane, self._lanes = lane, lanes
        self._lock = threading.Lock()
        #: The attempts running or awaiting their settle, in claim order (a
        #: dict used as an ordered set: attempts hash by identity, in C).
        self._in_flight: dict[Attempt, None] = {}
        #: The attempts the last pass started: what `gather` waits for.
        self._gathering: _Gathering | None = None

    def share(self, settings: JobsSettings) -> int:
        """This lane's share of `max_concurrent`; the shares add up to it, so a
        process never runs more attempts than the config allows."""
        return lane_share(settings.max_concurrent, self._lane, self._lanes)

    def in_flight(self) -> list[Attempt]:
        """The attempts holding a slot now, in claim order."""
        with self._lock:
            return list(self._in_flight)

    def taken(self) -> int:
        """How many attempts hold a slot (without copying them, as `in_flight` does)."""
        return len(self._in_flight)

    # -- the events --------------------------------------------------------------

    def started(self, attempts: list[Attempt]) -> None:
        """A pass claimed `attempts` and hands them to workers: each holds a slot,
        and the next pass gathers them."""
        with self._lock:
            self._in_flight.update(dict.fromkeys(attempts))
            self._gathering = _Gathering(attempts) if attempts else None

    def stopped(self, attempt: Attempt) -> None:
        """`attempt` stopped running: ring the doorbell, unless a gathering waits
        for others of its pass (see `_Gathering`)."""
        with self._lock:
            gathering = self._gathering
            if gathering is not None and attempt in gathering.pending:
                gathering.pending.discard(attempt)
                gathering.finished += 1
                if gathering.quiet and gathering.pending:
                    return
        self._doorbell.set()

    def settled(self, attempts: Iterable[Attempt]) -> None:
        """The rows of `attempts` are settled (or left to their leases): free their slots."""
        with self._lock:
            for attempt in attempts:
                self._in_flight.pop(attempt, None)

    def gather(self) -> None:
        """Wait a moment for the attempts the previous pass started, so the slots
        they free are claimed together, in one statement and one commit.

        Without it, short attempts (a few ms) finish one by one while a pass is
        under way, each next pass claims the one or two slots freed so far, and
        the drain pays a round trip and a commit per job or two. The gathering
        stops when every attempt of the previous pass has finished, or when
        `GATHER_SECONDS` pass with none finishing. An attempt that runs longer
        is waited for by one pass at most: after that it is not the previous
        pass's. The wait is on the doorbell, which the last of them rings (see
        `_Gathering`); any other ring ends it early, since a pass (what a ring
        asks for) follows at once.
        """
        gathering = self._gathering
        if gathering is None:
            return
        seen = -1
        while True:
            self._doorbell.clear()
            with self._lock:
                if not gathering.pending or gathering.finished == seen:
                    break
                seen = gathering.finished
                quiet = gathering.quiet
            if self._doorbell.wait(GATHER_SECONDS) and quiet:
                break  # the last of them, or another reason for a pass
        with self._lock:
            gathering.quiet = False
            if self._gathering is gathering:
                self._gathering = None

    def stop_gathering(self) -> bool:
        """Make every finish ring from now on; True if some already finished unrung."""
        with self._lock:
            gathering = self._gathering
            if gathering is None or not gathering.quiet:
                return False
            gathering.quiet = False
            return gathering.finished > 0
