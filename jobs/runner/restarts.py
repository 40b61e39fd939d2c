"""The supervisor's restart rules (`runjobs --processes`), as pure bookkeeping
over uptimes: how long a dead child waits before its replacement, and when
restarting stops helping. `jobs.runner.supervisor` acts on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.runner.process import EXIT_HARD_LIMIT

#: The first wait before a child is restarted; it doubles at each restart up to `MAX_DELAY`.
FIRST_DELAY = 0.5
MAX_DELAY = 30.0
#: A child up this long had a good run: its next restart waits `FIRST_DELAY` again.
STABLE_AFTER = 30.0
#: A child that exits sooner than this after its start failed to start.
START_WINDOW = 10.0
#: Failed starts in a row (across all children, none succeeding between) before giving up.
GIVE_UP_AFTER = 5


@dataclass(frozen=True)
class Restart:
    """What to do about a child that exited while the supervisor was not stopping."""

    delay: float
    reason: str
    give_up: bool = False


class RestartPolicy:
    """The backoff and give-up rules, as pure bookkeeping over uptimes (seconds)."""

    def __init__(self) -> None:
        self.failed_starts = 0
        self._delays: dict[int, float] = {}

    def started_fine(self) -> None:
        """A child has run `START_WINDOW`: the failed starts are no longer in a row."""
        self.failed_starts = 0

    def exited(self, index: int, uptime: float, status: int) -> Restart:
        if status == EXIT_HARD_LIMIT:
            return Restart(0.0, "hard_limit")
        delay = FIRST_DELAY if uptime >= STABLE_AFTER else self._delays.get(index, FIRST_DELAY)
        self._delays[index] = min(delay * 2, MAX_DELAY)
        if uptime >= START_WINDOW:
            self.started_fine()  # if the loop had not seen it yet
            return Restart(delay, "exited")
        self.failed_starts += 1
        return Restart(delay, "failed_to_start", self.failed_starts >= GIVE_UP_AFTER)


GIVE_UP_RULE = (
    f"{GIVE_UP_AFTER} runner processes in a row exited within {START_WINDOW:g} s of starting"
)
