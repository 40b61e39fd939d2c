"""jobs: background work for Django that survives the process.

Why a row and not a thread
--------------------------
A thread, or a task handed to the web server's event loop, is a promise the
process makes to itself, and a deploy or a crash breaks it. Here the schedule
is a row in the database. An attempt that fails writes its next `run_at` and
goes back in the queue; a process that dies leaves a lease that expires and a
row another runner takes. Retry and recovery are therefore the same table and
the same loop, and any part of a project that needs background work registers
a handler instead of writing its own.

The three things a handler must know
------------------------------------
1. `run` may be called again from scratch, after a retry, a crash or an
   expired lease. Nothing is promised about what an earlier attempt did, so
   make each step safe to repeat (check before you act).
2. `Retry` and `Failed` differ. `Retry` is the network, a timeout, a 503;
   `Failed` is a stated refusal or a payload that can never work. Calling a
   permanent failure retryable spends the budget and delays the real answer;
   the reverse throws away the retry this app exists for.
3. `abandon` fires once, when the job is retired for good, and never
   between retries (after the retirement commits; a crash during the call
   does not repeat it). It is where the subject hears the outcome, so
   somebody polling through a transient blip keeps seeing work in progress.

Wake-up and its grain
---------------------
`enqueue` rings an in-process doorbell when the caller's transaction commits,
so a runner in the same process starts the job at once. A runner in another
process (the usual `runjobs` beside a web server) hears of it within
milliseconds on PostgreSQL, whose NOTIFY goes out with the commit, and
elsewhere sees it at its next poll, at most `poll_interval_ms` later. The
claim itself is race-free across processes; `jobs.wakeup` is where every
wake-up is written.

Time limits, honestly
---------------------
A Python thread cannot be cancelled. When a synchronous `run` overruns its
budget (`budget()` or `lease_seconds`), the attempt is settled as a timed-out
retry and whatever it returns later is discarded, but the thread runs on until
the handler returns. An `async def run` is really cancelled at the budget.

Public API: `JobSpec`, `JobHandler`, `Done`, `Retry`, `Failed`, `Reschedule`,
`enqueue`, `enqueue_many`, `enqueue_or_log`, `register`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.handlers import Done, Failed, JobHandler, Reschedule, Retry
from jobs.registry import register
from jobs.spec import InvalidJobSpec, JobSpec

if TYPE_CHECKING:
    from jobs.queue import enqueue, enqueue_many, enqueue_or_log
    from jobs.workflows.api import Workflow

__version__ = "0.1.0"

__all__ = [
    "Done",
    "Failed",
    "InvalidJobSpec",
    "JobHandler",
    "JobSpec",
    "Reschedule",
    "Retry",
    "Workflow",
    "enqueue",
    "enqueue_many",
    "enqueue_or_log",
    "register",
]


def __getattr__(name: str) -> Any:
    # The queue needs the models, which cannot load while Django is still
    # importing this package as an installed app; import it on first use.
    if name in ("enqueue", "enqueue_many", "enqueue_or_log"):
        from jobs import queue

        return getattr(queue, name)
    if name == "Workflow":
        from jobs.workflows.api import Workflow

        return Workflow
    raise AttributeError(f"module 'jobs' has no attribute {name!r}")
