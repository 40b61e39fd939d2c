"""The supervisor's restart rules (`runjobs --processes`), as pure bookkeeping
over what each child said and how long it ran: how long a dead child waits
before its replacement, and when restarting stops helping.
`jobs.runner.supervisor` acts on them.

A start succeeds when the child says it is ready to claim (`jobs.runner.readiness`:
Django set up, the config read, its runners registered, `recover` done), not
after a fixed time: a child that dies after that died of what it was running
(a handler that calls `os._exit`, a segfault, the OOM killer), which no number
of restarts is to blame for, so it never counts towards giving up, and its
replacement waits at most `MAX_READY_DELAY`. Only children that die before
they are ready (an import error, a bad setting, a database refusing them)
count as failed starts, back off up to `MAX_DELAY`, and end in giving up.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.runner.process import EXIT_HARD_LIMIT, EXIT_RECYCLED

#: The first wait before a child is restarted; it doubles at each restart.
FIRST_DELAY = 0.5
#: The longest wait after a child that died before it was ready (a failed start).
MAX_DELAY = 30.0
#: The longest wait after a child that had become ready: what it ran killed
#: it, and the jobs waiting need a runner.
MAX_READY_DELAY = 2.0
#: A child up this long had a good run: its next restart waits `FIRST_DELAY` again.
STABLE_AFTER = 30.0
#: Failed starts in a row (across all children, none ready between) before giving up.
GIVE_UP_AFTER = 5

#: Exits a child chose, to be replaced at once: neither a failure nor a backoff.
ON_PURPOSE = {EXIT_HARD_LIMIT: "hard_limit", EXIT_RECYCLED: "recycled"}


@dataclass(frozen=True)
class Restart:
    """What to do about a child that exited while the supervisor was not stopping."""

    delay: float
    reason: str
    give_up: bool = False


class RestartPolicy:
    """The backoff and give-up rules, as pure bookkeeping (seconds)."""

    def __init__(self) -> None:
        self.failed_starts = 0
        self._delays: dict[int, float] = {}

    def started_fine(self) -> None:
        """A child said it is ready: the failed starts are no longer in a row."""
        self.failed_starts = 0

    def exited(self, index: int, uptime: float, status: int, *, ready: bool) -> Restart:
        """Child `index` exited with `status` after `uptime`, having said it was
        `ready` or not."""
        if ready and status in ON_PURPOSE:
            return Restart(0.0, ON_PURPOSE[status])
        delay = FIRST_DELAY if uptime >= STABLE_AFTER else self._delays.get(index, FIRST_DELAY)
        if ready:
            delay = min(delay, MAX_READY_DELAY)
            self._delays[index] = min(delay * 2, MAX_READY_DELAY)
            return Restart(delay, "exited")
        self._delays[index] = min(delay * 2, MAX_DELAY)
        self.failed_starts += 1
        return Restart(delay, "failed_to_start", self.failed_starts >= GIVE_UP_AFTER)


GIVE_UP_RULE = f"{GIVE_UP_AFTER} runner processes in a row exited before they were ready to claim"
