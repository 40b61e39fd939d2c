"""`jobs pause`, `jobs resume` and `jobs limit`: the operator's live controls
from a shell, written through `jobs.controls` (which logs each, naming who)."""

from __future__ import annotations

from collections.abc import Callable

from jobs import controls

Write = Callable[[str], None]


def pause(write: Write, scope: str, name: str, *, paused: bool, by: str, using: str) -> int:
    """Pause or resume a queue or kind; says so, and what it means."""
    controls.pause(scope, name, by, paused, using=using)
    if paused:
        write(
            f"paused {scope} {name} (by {by}): runners claim none of its jobs from their next "
            "claim; running attempts finish, and jobs can still be queued"
        )
    else:
        write(f"resumed {scope} {name} (by {by})")
    return 0


def limit(write: Write, kind: str, value: int | None, *, by: str, using: str) -> int:
    """Set a kind's concurrency limit in the database, or give it back to its handler."""
    controls.set_limit(kind, by, value, using=using)
    if value is None:
        write(f"kind {kind} takes its handler's concurrency_limit again (by {by})")
    elif value == 0:
        write(f"kind {kind} held: limit 0, no new attempt starts (by {by})")
    else:
        write(f"kind {kind} limited to {value} attempts at once across every runner (by {by})")
    return 0
