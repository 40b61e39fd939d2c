"""An operator's actions in a job's attempt record: who retried it, or made it
due now, and when.

The record (`jobs.history`) is where an operator reads a job's story; a
Retry that left no trace made a job's second life look like its first. So
each action adds an entry (`operator_action`, written by `jobs.operations`
in the action's own transaction). A cancel needs nothing here: it is an
`Outcome.CANCELLED` entry already, naming who. An action's entry is no
attempt: it has no attempt number and no error class, is no `TaskError` of
the task API, and is not counted among the attempts that did not end done
(`not_done`).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from jobs.history import Entry, entries, record, total


class Action(enum.StrEnum):
    """What an operator did, as its entry's `outcome` says it."""

    #: Retry: queued again, due now, with a fresh attempt budget.
    RETRIED = "retried"
    #: Run now: a queued job made due now.
    RUN_NOW = "run_now"


#: What each action did, in the words its entry says after who did it.
_DID = {
    Action.RETRIED: "queued again, due now, with a fresh attempt budget",
    Action.RUN_NOW: "made due now",
}


def operator_action(action: Action, by: str, now: datetime) -> Entry:
    """The entry for an operator's `action` on a job at `now`, saying who."""
    return record(
        attempt=None,
        started_at=None,
        ended_at=now,
        runner="",
        outcome=action,
        error=f"{action.replace('_', ' ')} by {by or 'an operator'}: {_DID[action]}",
    )


def is_action(entry: Entry) -> bool:
    """Whether `entry` is an operator's action, not an attempt."""
    return entry.outcome in _DID


def not_done(stored: Any) -> int:
    """How many attempts did not end done: `history.total` less the actions
    kept (one dropped past `MAX_ENTRIES` is counted, which the heading's "the
    last N are kept" then owns up to)."""
    return total(stored) - sum(1 for entry in entries(stored) if is_action(entry))
