"""Lifecycle hooks: how a feature built on jobs joins a job's life without the
generic path knowing the feature exists.

Schedules are the first user (`jobs.schedules.hook`); workflows and sequences
are built on the same moments. The runner and the retirement call every
registered hook at each moment, and never name one:

- `before_run`: a claimed row, before its handler is called. A hook that
  recognises the job answers with a `Verdict`: skip the row unrun (moved by
  the hook, fenced like any settle), or run it and see its final settle.
- `after_settle`: inside the transaction of a job's final settle (done,
  failed, cancelled), so what a hook writes there commits if and only if the
  settle does. Retirements and cancels call it for every job; a `Done` only
  for the jobs a hook answered for in `before_run` (the others settle in the
  pass's batch, whose statement is also its claim). Those `Done`s are
  settled together, each pass's in one transaction before its claim, and
  told to each hook at once (`after_settle_many`, which a hook may answer
  in a few statements for the lot).
- `at_start`: once per recovering runner, after every handler's `recover`;
  `config_changed`: when a runner finds the live config changed.
- `upkeep`: every `upkeep_seconds` between a recovering runner's passes.

A hook is registered once per process, by its app's `ready()` (`register`).
A hook that recognises nothing costs each attempt one call per hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.config import JobsSettings
    from jobs.models import Job
    from jobs.registry import Registry
    from jobs.store import Store

#: Moves a claimed row unrun (its attempt given back) at `now`; False when the
#: attempt no longer owns the row. Called inside a transaction.
Skip = Callable[["Store", "Job", datetime], bool]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A hook's answer for a job it recognises, before the job's handler runs.

    With `skip`, the row is moved unrun by it instead of run; without, the job
    runs, and its `Done` is settled with the other such `Done`s of the pass,
    with `after_settle_many` in that settle's transaction. `reason` says
    why, for the hook's own log."""

    skip: Skip | None = None
    reason: str = ""


class Hook:
    """A feature's part in each job's life. Every moment is a no-op here: a hook
    overrides the ones it needs. Hooks must tell their own jobs apart cheaply
    (a key prefix, a column): they are asked about every job."""

    #: Seconds between `upkeep` calls on a recovering runner; None for never.
    upkeep_seconds: float | None = None

    #: A column of `Job` that marks the jobs this hook follows when it is not
    #: NULL (and that a claim reads back): each runs as any job, and its
    #: `Done` is settled with `after_settle_many`, as if `before_run` had
    #: answered `Verdict()`, which is then never called. Cheaper than a
    #: call for every job: a plain job costs the runner one attribute read.
    marks: str | None = None

    #: When set, only jobs whose key starts with it are asked `before_run`:
    #: the others cost the runner a string comparison rather than a call.
    key_prefix: str | None = None

    def before_run(self, job: Job, clock: Callable[[], datetime], using: str) -> Verdict | None:
        """The verdict on the claimed `job`, or None for a job this hook does
        not recognise. `clock()` is the runner's time, read only if needed."""
        return None

    def after_settle(
        self, store: Store, job: Job, now: datetime, state: str, started: datetime | None
    ) -> None:
        """`job` has just been settled for good as `state` at `now`, in the
        caller's transaction. `started`: when its last attempt began, or None
        if it never ran (cancelled while queued)."""

    def after_settle_many(
        self, store: Store, jobs: Sequence[Job], now: datetime, state: str
    ) -> None:
        """`jobs` (the `Done`s of one pass, in id order) have just been settled
        for good as `state` at `now`, together, in the caller's transaction.
        Each in turn through `after_settle` unless a hook does better."""
        for job in jobs:
            self.after_settle(store, job, now, state, job.started_at)

    def at_start(self, registry: Registry, settings: JobsSettings, using: str) -> None:
        """A recovering runner starts: bring this feature's rows up to date."""

    def config_changed(
        self, previous: JobsSettings, current: JobsSettings, registry: Registry, using: str
    ) -> None:
        """A runner found the live config changed from `previous` to `current`."""

    def upkeep(self, using: str) -> None:
        """A recovering runner's periodic look (every `upkeep_seconds`). What
        it raises reaches the runner's loop: catch what is expected."""


#: The hooks of this process, in registration order.
HOOKS: list[Hook] = []


def register(hook: Hook) -> None:
    """Add `hook` to every job's life in this process; registering it again is a no-op."""
    if hook not in HOOKS:
        HOOKS.append(hook)


#: The verdict on a job a hook `marks`: run it, and see its final settle.
FOLLOW = Verdict(reason="marked")


def before_run(job: Job, clock: Callable[[], datetime], using: str) -> Verdict | None:
    """The first verdict a hook gives on `job`, or None: run it as any job."""
    for hook in HOOKS:
        column = hook.marks
        if column is not None:
            if job.__dict__.get(column) is not None:
                return FOLLOW
            continue
        prefix = hook.key_prefix
        if prefix is not None and not job.key.startswith(prefix):
            continue
        verdict = hook.before_run(job, clock, using)
        if verdict is not None:
            return verdict
    return None


def after_settle(
    store: Store, job: Job, now: datetime, state: str, started: datetime | None
) -> None:
    """Tell every hook that `job` was settled for good (see `Hook.after_settle`)."""
    for hook in HOOKS:
        hook.after_settle(store, job, now, state, started)


def after_settle_many(store: Store, jobs: Sequence[Job], now: datetime, state: str) -> None:
    """Tell every hook that `jobs` were settled for good together (see
    `Hook.after_settle_many`)."""
    for hook in HOOKS:
        hook.after_settle_many(store, jobs, now, state)


def at_start(registry: Registry, settings: JobsSettings, using: str) -> None:
    """Tell every hook that a recovering runner starts (see `Hook.at_start`)."""
    for hook in HOOKS:
        hook.at_start(registry, settings, using)


def config_changed(
    previous: JobsSettings, current: JobsSettings, registry: Registry, using: str
) -> None:
    """Tell every hook of a config change (see `Hook.config_changed`)."""
    for hook in HOOKS:
        hook.config_changed(previous, current, registry, using)
