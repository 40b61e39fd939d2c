"""The handler contract: what one kind of work must provide, and how an attempt ends.

A handler is a class, registered once per kind (`jobs.registry`). The runner
promises only what is written here; in particular nothing about what a
previous attempt did, which is why `run` must be safe to start again.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from jobs.spec import DEFAULT_PRIORITY, DEFAULT_QUEUE

if TYPE_CHECKING:
    from jobs.models import Job


#: The largest `Done.result`: 1 MiB of its JSON text, as for a payload
#: (`jobs.spec.PAYLOAD_MAX_BYTES`). A result says what came of the work, and
#: every database stores one of this size in a statement of its own (MariaDB
#: refuses a statement past its `max_allowed_packet`, 16 MiB by default; a
#: batch of results past it is settled row by row).
RESULT_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Done:
    """Finished. The row settles `done` and releases its identity.

    `result`, if given, is kept on the row (the `django.tasks` backend keeps a
    task's return value there). It must be something every supported database
    stores as JSON: JSON-serialisable, at most `RESULT_MAX_BYTES` of it, nested
    at most `jobs.spec.JSON_MAX_DEPTH` levels, without a NUL or a lone
    surrogate in its text. Anything else makes the attempt the job's own
    `Failed`, saying what was wrong: the result of a run that will return the
    same again is lost either way, and running it again would repeat its work.
    """

    result: Any = None


@dataclass(frozen=True)
class Retry:
    """This attempt failed for a reason that may not recur (the network, a 503).

    Another attempt is scheduled after the backoff unless the attempts or the
    deadline have run out; then the job is retired and `abandon` is called.
    `exception`, when the failure was one, names its class in the attempt
    record (`Job.errors`); `reason` is then its traceback. A `reason` that is
    not text is kept as its `str()` (None as a sentence saying none was
    given), and a NUL or a lone surrogate in it as its escape, so the settle
    always stores (`jobs.runner.outcomes`).
    """

    reason: str
    exception: BaseException | None = field(default=None, kw_only=True, compare=False)


@dataclass(frozen=True)
class Failed:
    """This will never succeed (a stated refusal, a payload that cannot parse).

    The job is retired at once and `abandon` is called. `exception` and
    `reason` as for `Retry`.
    """

    reason: str
    exception: BaseException | None = field(default=None, kw_only=True, compare=False)


@dataclass(frozen=True)
class Reschedule:
    """This occurrence is finished; run again after `delay`, with a fresh budget.

    The row stays live and keeps its identity, which is what makes a periodic
    job one row rather than a growing pile of them. `delay` must be a
    positive timedelta: anything else (a zero or negative delay would run the
    job again at once, for ever) makes the attempt the job's own `Failed`.
    """

    delay: timedelta


Outcome = Done | Retry | Failed | Reschedule


class JobHandler:
    """One kind of background work. Subclass, set `kind`, and decorate with `@register`."""

    #: The `Job.kind` this handler answers for.
    kind: ClassVar[str]
    #: The queue a job of this kind goes to when its spec names none; read at
    #: enqueue, so changing it moves new jobs only.
    queue: ClassVar[str] = DEFAULT_QUEUE
    #: Its priority likewise (-100 to 100, higher first).
    priority: ClassVar[int] = DEFAULT_PRIORITY
    #: At most this many attempts of the kind running at once across every
    #: runner and process (None: no limit; 0: hold the kind's jobs). Enforced
    #: at each claim, so a change reaches the next claim of each runner that
    #: runs the new code.
    concurrency_limit: ClassVar[int | None] = None
    #: Run this kind on a schedule, as a schedule named after the kind with an
    #: empty payload: a five-field cron expression ("0 2 * * *", in
    #: `settings.TIME_ZONE`), or a number of seconds or a timedelta between
    #: fire times. Read at each runner's start (`jobs.schedules`);
    #: `settings.JOBS_SCHEDULES` says more (a zone, a payload, `missed`).
    schedule: ClassVar[str | int | float | timedelta | None] = None
    #: Whether the class overrides `completed`: the runner calls it only then,
    #: so a `Done` costs nothing extra for the handlers that do not.
    listens: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.listens = cls.completed is not JobHandler.completed
        if "lease" in cls.__dict__ and "budget" not in cls.__dict__:
            # The budget's old name: it still sets the budget, once per class.
            warnings.warn(
                f"{cls.__qualname__}.lease() is deprecated: rename it budget() "
                "(it is the attempt's budget; the lease on the row is derived from it)",
                DeprecationWarning,
                stacklevel=2,
            )
            cls.budget = cls.__dict__["lease"]  # type: ignore[method-assign]

    def run(self, job: Job) -> Outcome | Any:
        """Run one attempt and say how it ended.

        May be called again from scratch for the same job: after a retry, after
        a crash, after a lease expired. An exception escaping here is a `Retry`
        with the traceback kept in `last_error`. May be an `async def`, in which
        case the attempt's budget really cancels it.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement run(job)")

    def budget(self) -> timedelta | None:
        """How long one attempt may take; `None` takes the configured `lease_seconds`.

        Read at each claim. The runner settles an attempt that overruns this
        as a timed-out retry, and writes a lease on the row slightly longer,
        so its own timeout always fires before another runner may take the row.
        """
        return None

    def lease(self) -> timedelta | None:
        """Deprecated: the old name of `budget`, which it returns. A subclass that
        still overrides `lease` has it used as its `budget`, with a warning."""
        warnings.warn(
            "JobHandler.lease() is deprecated: call budget()", DeprecationWarning, stacklevel=2
        )
        if type(self).budget is type(self).__dict__.get("lease"):
            return None  # a subclass's `lease` calling up: the default budget
        return self.budget()

    def abandon(self, job: Job, reason: str) -> None:
        """Called once when the job is retired for good, never between retries.

        Runs just after the retirement has committed, in a database
        transaction of its own: writes made here commit together when it
        returns. If this raises (or its connection is lost), its writes are
        rolled back, the error is logged, and the job stays retired. At most
        once: a process that dies before the call leaves it owed to a runner
        with this handler; one that dies during it does not make it again
        (`jobs.retirement`).
        """

    def completed(self, job: Job) -> None:
        """Called once after an attempt's `Done` has committed, with `job` as
        settled (`state` done, `result` what it returned, `finished_at`).

        For telling others that the work is finished (the `django.tasks`
        backend sends Django's `task_finished` from here), not for work of its
        own: it runs on the runner's claiming thread, so it must be quick, and
        an exception here is logged and changes nothing. Never called for a
        `Done` that lost its row to a newer claim or a cancel. The runner skips
        the call for handlers that do not override it.
        """

    def recover(self) -> None:
        """Re-derive work a previous process left unfinished; runs once at start-up.

        Enqueue rather than act: the live-identity constraint makes a repeated
        recover queue nothing twice.
        """
