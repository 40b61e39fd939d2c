"""What a live job waits for, per job and as filters for counting.

A queued job that is not running yet waits for one of five things, and an
operator in an incident must know which: its `run_at` (not due yet), its
schedule (an occurrence of a disabled schedule: skipped, unrun, at its fire
time), a pause (its queue or kind paused), a runner (no live runner serves
its kind in its queue: runners serve (kind, queue) pairs, not kinds), or a
limit (its kind's concurrency limit is full). A due job held by none of
these waits only for a free slot of a runner that serves it (`READY`).

`Holds.read` reads what holds jobs once per screen (live runners, controls,
the running count of each limited kind, disabled schedules: four small
queries, none over history); it is then asked per job (`Holds.of`, every
hold in force, for `jobs show` and the job's page) or turned into one filter
per reason (`Holds.first_rows`) that `backlog` counts with, each row under
the first of `HOLDS` that holds it, so the totals add up. `backlog` is the
one count of the waiting jobs: the dashboard and `jobs stats` (through
`jobs.stats.collect`) and the `jobs_waiting_jobs`, `jobs_ready` and
`jobs_queue_lag_seconds` metrics all read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Min, Q
from django.utils import timezone

from jobs.controls import Controls, problem
from jobs.models import LIVE_ROWS, Control, Job, RunnerProcess, Schedule, State
from jobs.presentation import relative
from jobs.registry import registry
from jobs.schedules.plan import KEY_PREFIX
from jobs.spec import DEFAULT_QUEUE
from jobs.store import workflow_reads

#: The reasons, as the metric's `reason` label and `jobs stats --json` name them.
SCHEDULE, RUN_AT, PAUSE, RUNNER, LIMIT = "schedule", "run_at", "pause", "runner", "limit"
#: A due job nothing holds: it waits for a free slot only.
READY = "ready"
#: The holds in the order a job held by several is counted under the first:
#: a disabled schedule's occurrence never runs, whatever else; a job not due
#: is not waiting yet; an operator's pause outranks a missing runner, which
#: outranks a full limit (a limit frees itself, a runner does not).
HOLDS = (SCHEDULE, RUN_AT, PAUSE, RUNNER, LIMIT)
REASONS = (*HOLDS, READY)

#: A workflow's waiting step: not counted with the others (it is not queued),
#: said by `jobs show` (`dependencies`).
DEPENDENCIES = "dependencies"

#: How each reason reads in a sentence: "waits for a pause: ...".
NOUNS = {
    SCHEDULE: "its schedule",
    RUN_AT: "its run_at",
    PAUSE: "a pause",
    RUNNER: "a runner",
    LIMIT: "a limit",
    READY: "a free slot",
    DEPENDENCIES: "its workflow's dependencies",
}

#: How many of a waiting step's unsettled dependencies its hold names.
NAMED_DEPENDENCIES = 5


@dataclass(frozen=True)
class Hold:
    """One thing holding a job back: its reason (one of `HOLDS`) and the detail."""

    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{NOUNS[self.reason]} ({self.detail})"


@dataclass(frozen=True)
class Holds:
    """What holds live jobs back at `now`."""

    now: datetime
    #: Each live runner's kinds and queues (None: every queue).
    runners: tuple[tuple[frozenset[str], frozenset[str] | None], ...]
    paused_queues: frozenset[str]
    paused_kinds: frozenset[str]
    #: Each kind whose concurrency limit is full: (running, limit).
    full: Mapping[str, tuple[int, int]]
    #: The (kind, key) of each disabled schedule's occurrences, to its name.
    disabled: Mapping[tuple[str, str], str]

    @classmethod
    def read(cls, using: str | None = None, now: datetime | None = None) -> Holds:
        alias = using or DEFAULT_DB_ALIAS
        now = now or timezone.now()
        live = RunnerProcess.objects.using(alias).filter(
            heartbeat_at__gte=now - RunnerProcess.STALE_AFTER
        )
        runners = tuple(
            (frozenset(r.kinds), frozenset(r.queues) if r.queues else None) for r in live
        )
        controls = _controls(alias)
        return cls(
            now=now,
            runners=runners,
            paused_queues=controls.paused_queues,
            paused_kinds=controls.paused_kinds,
            full=_full_limits(alias, controls, now),
            disabled={
                (kind, KEY_PREFIX + name): name
                for name, kind in Schedule.objects.using(alias)
                .filter(enabled=False)
                .values_list("name", "kind")
            },
        )

    # -- one job -------------------------------------------------------------------

    def serves(self, kind: str, queue: str) -> bool:
        """Whether a live runner would claim a ready job of `kind` in `queue`."""
        return any(
            kind in kinds and (queues is None or queue in queues) for kinds, queues in self.runners
        )

    def of(self, job: Job, *, stuck: str = "") -> list[Hold]:
        """Every hold on `job`, in `HOLDS` order; [] for a job nothing holds
        (due, and served), a settled job, or a running job a live runner
        holds. A running job nobody works on (`stuck`, from `jobs.holding`)
        is held as a queued one would be until another runner takes it."""
        if job.state == State.RUNNING and not stuck:
            return []
        if job.state not in (State.QUEUED, State.RUNNING):
            return []
        holds = []
        schedule = self.disabled.get((job.kind, job.key))
        if schedule is not None:
            holds.append(Hold(SCHEDULE, f"{schedule} is disabled: skipped, unrun, when due"))
        due = job.run_at if job.state == State.QUEUED else job.lease_expires_at
        if due is not None and due > self.now:
            what = "due" if job.state == State.QUEUED else "its lease ends, then taken again"
            holds.append(Hold(RUN_AT, f"{what} {relative(due, self.now)}"))
        paused = [
            f"{scope} {name} is paused"
            for scope, name, held in (
                ("queue", job.queue, job.queue in self.paused_queues),
                ("kind", job.kind, job.kind in self.paused_kinds),
            )
            if held
        ]
        if paused:
            holds.append(Hold(PAUSE, " and ".join(paused)))
        if not self.serves(job.kind, job.queue):
            holds.append(
                Hold(RUNNER, f"no live runner serves kind {job.kind} in queue {job.queue}")
            )
        if job.kind in self.full:
            running, limit = self.full[job.kind]
            holds.append(
                Hold(LIMIT, f"kind {job.kind} has {running} running, its limit is {limit}")
            )
        return holds

    # -- every row -------------------------------------------------------------------

    def served_rows(self) -> Q | None:
        """The rows some live runner would claim (None: no row)."""
        served = None
        for kinds, queues in self.runners:
            if kinds:
                rows = Q(kind__in=sorted(kinds))
                rows &= Q(queue__in=sorted(queues)) if queues else Q()
                served = rows if served is None else served | rows
        return served

    def first_rows(self) -> dict[str, Q | None]:
        """Per reason of `REASONS`, the queued rows counted under it (the first
        hold of `HOLDS` that holds them; `READY` for none): a filter, or None
        where no row can be. `Q()` is every row."""
        served = self.served_rows()
        ladder: list[tuple[str, Q | None]] = [
            (SCHEDULE, _any(Q(kind=kind, key=key) for kind, key in self.disabled)),
            (RUN_AT, Q(run_at__gt=self.now)),
            (
                PAUSE,
                _any(
                    [
                        *([Q(queue__in=sorted(self.paused_queues))] if self.paused_queues else []),
                        *([Q(kind__in=sorted(self.paused_kinds))] if self.paused_kinds else []),
                    ]
                ),
            ),
            (RUNNER, Q() if served is None else ~served),
            (LIMIT, Q(kind__in=sorted(self.full)) if self.full else None),
            (READY, Q()),
        ]
        firsts: dict[str, Q | None] = {}
        earlier: list[Q] = []
        for reason, rows in ladder:
            if rows is None or any(not prior for prior in earlier):  # an earlier one took all
                firsts[reason] = None
                continue
            counted = rows
            for prior in earlier:
                counted &= ~prior
            firsts[reason] = counted
            earlier.append(rows)
        return firsts


def _any(filters: Iterable[Q]) -> Q | None:
    """The rows any of `filters` matches; None for no filter."""
    found: Q | None = None
    for rows in filters:
        found = rows if found is None else found | rows
    return found


def _controls(using: str) -> Controls:
    """The usable pauses and database limits."""
    rows = [row for row in Control.objects.using(using) if problem(row) is None]
    return Controls(
        paused_queues=frozenset(r.name for r in rows if r.scope == "queue" and r.paused),
        paused_kinds=frozenset(r.name for r in rows if r.scope == "kind" and r.paused),
        kind_limits={
            r.name: r.concurrency_limit
            for r in rows
            if r.scope == "kind" and r.concurrency_limit is not None
        },
    )


def _full_limits(using: str, controls: Controls, now: datetime) -> dict[str, tuple[int, int]]:
    """Each kind whose limit in force (the database's, else its handler's) is
    reached by its running attempts on a lease still good, as a claim counts
    them: (running, limit)."""
    handler_limits = {
        handler.kind: handler.concurrency_limit
        for handler in registry
        if handler.concurrency_limit is not None
    }
    limits = controls.limits(handler_limits, {*handler_limits, *controls.kind_limits})
    if not limits:
        return {}
    running = dict.fromkeys(limits, 0)
    counted = (
        Job.objects.using(using)
        .filter(LIVE_ROWS, state=State.RUNNING, kind__in=sorted(limits), lease_expires_at__gt=now)
        .values("kind")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in counted:
        running[row["kind"]] = row["n"]
    return {
        kind: (running[kind], limit) for kind, limit in limits.items() if running[kind] >= limit
    }


def unserved_pairs(using: str | None = None, holds: Holds | None = None) -> list[tuple[str, str]]:
    """The (kind, queue) pairs of live jobs that no live runner would claim: a
    runner serves its kinds in its queues, so one serving kind k in queue
    emails leaves k's jobs in queue reports to nobody, and says so exactly."""
    alias = using or DEFAULT_DB_ALIAS
    holds = holds or Holds.read(alias)
    live = Job.objects.using(alias).filter(LIVE_ROWS)
    served = holds.served_rows()
    pairs = (live if served is None else live.exclude(served)).values_list("kind", "queue")
    return sorted(set(pairs.distinct().order_by()))


@dataclass
class Backlog:
    """The queued rows at `now`, per queue and reason (`jobs.waiting.REASONS`):
    how many, and the oldest one's run_at; and per queue the due rows, whatever
    holds them, and the oldest one's run_at (the lag)."""

    now: datetime
    jobs: dict[str, dict[str, int]]
    oldest: dict[str, dict[str, datetime | None]]
    due: dict[str, int]
    oldest_due: dict[str, datetime | None]

    def _wait(self, oldest: datetime | None) -> float:
        return max(0.0, (self.now - oldest).total_seconds()) if oldest else 0.0

    def lag(self, queue: str) -> float:
        """Seconds the oldest due job of `queue` has waited past its run_at."""
        return self._wait(self.oldest_due.get(queue))

    @property
    def lag_seconds(self) -> float:
        return max((self.lag(queue) for queue in self.due), default=0.0)

    def wait(self, queue: str, reason: str) -> float:
        return self._wait(self.oldest[queue][reason]) if queue in self.oldest else 0.0

    def total(self, reason: str) -> dict[str, float]:
        """{"jobs": n, "oldest_seconds": wait} for `reason` over every queue."""
        waits = [self.wait(queue, reason) for queue in self.jobs if self.jobs[queue][reason]]
        jobs = sum(counts[reason] for counts in self.jobs.values())
        return {"jobs": jobs, "oldest_seconds": max(waits, default=0.0)}

    def by_queue(self) -> dict[str, dict[str, Any]]:
        return {
            queue: {
                "lag_seconds": self.lag(queue),
                "due": self.due[queue],
                **{
                    reason: {"jobs": counts[reason], "oldest_seconds": self.wait(queue, reason)}
                    for reason in REASONS
                },
            }
            for queue, counts in sorted(self.jobs.items())
        }


def backlog(
    using: str | None = None, now: datetime | None = None, holds: Holds | None = None
) -> Backlog:
    """The queued rows by queue and by what holds them (`jobs.waiting.Holds`),
    in one query over the live rows: the numbers the dashboard, `jobs stats`
    and the `jobs_waiting_jobs` and `jobs_queue_lag_seconds` metrics show.
    Every queue a live row names is present, and `DEFAULT_QUEUE` always."""
    alias = using or DEFAULT_DB_ALIAS
    now = now or timezone.now()
    holds = holds or Holds.read(alias, now)
    firsts = {reason: rows for reason, rows in holds.first_rows().items() if rows is not None}
    queued = Q(state=State.QUEUED)
    due = queued & Q(run_at__lte=now)
    columns: dict[str, Any] = {"n_due": Count("id", filter=due), "o_due": Min("run_at", filter=due)}
    for reason, held in firsts.items():
        columns[f"n_{reason}"] = Count("id", filter=queued & held)
        columns[f"o_{reason}"] = Min("run_at", filter=queued & held)
    found = Backlog(now, {}, {}, {}, {})
    live = Job.objects.using(alias).filter(LIVE_ROWS)
    # Over every live row, so that a queue with running rows only keeps its series.
    rows: list[dict[str, Any]] = [
        dict(row) for row in live.values("queue").annotate(**columns).order_by("queue")
    ]
    if not any(row["queue"] == DEFAULT_QUEUE for row in rows):
        rows.append({"queue": DEFAULT_QUEUE})
    for row in rows:
        queue = row["queue"]
        found.jobs[queue] = {reason: row.get(f"n_{reason}", 0) for reason in REASONS}
        found.oldest[queue] = {reason: row.get(f"o_{reason}") for reason in REASONS}
        found.due[queue], found.oldest_due[queue] = row.get("n_due", 0), row.get("o_due")
    return found


def dependencies(job: Job, using: str | None = None, now: datetime | None = None) -> Hold | None:
    """What a workflow's waiting step waits for: its dependencies not yet
    settled, by name, and when it is due once released; None for a job that
    is not waiting. Three reads (`jobs.store.workflow_reads.waits_for`)."""
    if job.state != State.WAITING:
        return None
    now = now or timezone.now()
    due_at, edges = workflow_reads.waits_for(using or DEFAULT_DB_ALIAS, job.id)
    pending = [name for _, name, outcome in edges if outcome is None]
    named = ", ".join(pending[:NAMED_DEPENDENCIES])
    if (more := len(pending) - NAMED_DEPENDENCIES) > 0:
        named += f" and {more} more"
    detail = f"{len(pending)} of {len(edges)} not settled"
    detail += f": {named}" if pending else ""
    if due_at is not None and due_at > now:
        detail += f"; once released, due {relative(due_at, now)}"
    return Hold(DEPENDENCIES, detail)


def describe(holds: list[Hold], job: Job) -> str:
    """What `job` waits for, in one line: its holds, or that nothing holds it."""
    if holds:
        return "; then ".join(str(hold) for hold in holds)
    if job.state == State.QUEUED:
        return "nothing holds it: it waits for a free slot of a live runner that serves it"
    return "-"
