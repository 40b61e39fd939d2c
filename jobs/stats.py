"""The queue's numbers, computed once for the admin dashboard, `manage.py jobs
stats` and the table's metrics.

Every query here stays cheap on a table with millions of settled rows: live
rows are counted through the `jobs_job_ready` index, recent settles through
`jobs_job_settled` (a range on `finished_at`), the per-minute charts read the
runners' counters (`jobs.metrics.minutes`), and nothing scans history
except the settled counts by state, which PostgreSQL estimates from its
statistics. The waiting jobs are counted by `jobs.waiting.backlog`, once,
for every screen: the dashboard, `jobs stats` and `jobs_waiting_jobs`
cannot disagree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Q, QuerySet
from django.utils import timezone

from jobs.holding import Holders
from jobs.metrics import minutes
from jobs.metrics.minutes import Minute
from jobs.models import (
    LIVE_ROWS,
    SETTLED_ROWS,
    SETTLED_STATES,
    Control,
    Job,
    RunnerProcess,
    State,
)
from jobs.store import for_database
from jobs.waiting import REASONS, RUNNER, Holds, backlog, unserved_pairs


@dataclass
class RunnerInfo:
    hostname: str
    pid: int
    version: str
    started_at: datetime
    heartbeat_at: datetime
    max_concurrent: int
    running: int
    kinds: list[str]
    gone: bool
    #: "lane 0 of 2" for one of a process's lanes (`runjobs --lanes`), else "".
    lane: str = ""
    #: How the runner names itself: "host:pid", and its lane when it has one.
    name: str = ""
    #: The queues it claims from; None for every queue.
    queues: list[str] | None = None

    @property
    def process(self) -> tuple[str, int]:
        """The process it runs in: several lanes share one."""
        return (self.hostname, self.pid)


@dataclass
class Stats:
    now: datetime
    #: Rows per state; settled states are estimates on PostgreSQL (see `estimated`).
    by_state: dict[str, int]
    estimated: bool
    #: Live rows per kind and state.
    live_by_kind: dict[str, dict[str, int]]
    #: Seconds the oldest due queued job has waited past its run_at, whatever
    #: holds it (a pause, a limit, no runner, or only busy slots); 0 when
    #: none is due. `waiting` says what holds the due jobs.
    lag_seconds: float
    #: Settles in the last 5 minutes and the last hour, by state.
    last_5_minutes: dict[str, int]
    last_hour: dict[str, int]
    #: Kinds by mean attempt duration over the last hour, slowest first.
    slowest_kinds: list[dict[str, Any]]
    #: Attempts done and failed per minute over the last hour, oldest first,
    #: every queue summed: [minute, done, failed] (the runners' counts).
    throughput: list[tuple[datetime, int, int]]
    runners: list[RunnerInfo] = field(default_factory=list)
    #: Running rows nobody is working on (`jobs.holding`): a runner gone
    #: silent, or a lease expired. Counted in `by_state["running"]` too.
    stuck: int = 0
    #: Due rows no live runner serves (their kind in their queue), a pause
    #: left aside: how many, and the oldest one's wait (`waiting`'s "runner").
    unhandled: int = 0
    unhandled_wait_seconds: float = 0.0
    #: Queued rows per reason (`jobs.waiting.REASONS`), each under the first
    #: hold that holds it: {"jobs": n, "oldest_seconds": wait past run_at}.
    waiting: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The same per queue, with each queue's "lag_seconds".
    waiting_by_queue: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (kind, queue) pairs of live rows that no live runner serves.
    unserved: list[tuple[str, str]] = field(default_factory=list)
    #: Per queue, each minute of the last hour as the runners counted it
    #: (`jobs.metrics.minutes`): started, done, failed, wait p50 and p95.
    per_minute: dict[str, list[Minute]] = field(default_factory=dict)
    #: Per kind, settles of the last hour: {"done": n, "failed": n}.
    kinds_last_hour: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The operator's controls in force: each paused queue or kind and each
    #: kind's limit set in the database, with who set it and when.
    controls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def healthy_running(self) -> int:
        """Running rows held by a live runner on a good lease."""
        return self.by_state.get(State.RUNNING, 0) - self.stuck

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["healthy_running"] = self.healthy_running
        data["throughput"] = [
            {"minute": m.isoformat(), "done": d, "failed": f} for m, d, f in self.throughput
        ]
        encoded: dict[str, Any] = _jsonable(data)
        return encoded


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


#: Below this many rows an exact count is cheap; above it PostgreSQL estimates.
ESTIMATE_ABOVE = 100_000


def _settled_estimates(using: str) -> dict[str, int] | None:
    """Settled rows per state from the database's statistics (no scan), or None.

    None on databases that keep none (only PostgreSQL does), on small tables,
    and before ANALYZE has run: the caller then counts exactly.
    """
    store = for_database(using)
    total = store.estimated_rows()
    if total is None or total < ESTIMATE_ABOVE:
        return None
    shares = store.state_shares()
    if shares is None:
        return None
    return {state.value: int(total * shares.get(state.value, 0.0)) for state in SETTLED_STATES}


def collect(using: str | None = None, now: datetime | None = None) -> Stats:
    """Every figure of the dashboard at `now`, one query (or two) per figure."""
    alias = using or DEFAULT_DB_ALIAS
    with for_database(alias).screen_reads():
        return _collect(alias, now or timezone.now())


def _collect(alias: str, now: datetime) -> Stats:
    jobs = Job.objects.using(alias)
    live = jobs.filter(LIVE_ROWS)
    by_state, live_by_kind = _live_counts(live)
    estimate = _settled_estimates(alias)
    by_state.update(_settled_counts(jobs) if estimate is None else estimate)
    recent = jobs.filter(SETTLED_ROWS, finished_at__gte=now - timedelta(hours=1))
    last_5, last_hour, kinds_last_hour, slowest = _last_hour(recent, now)
    per_minute = minutes.read(alias, now)
    runners = _runners(alias, now)
    holds = Holds.read(alias, now)
    waiting = backlog(alias, now, holds)
    controls = _controls(alias)
    unhandled = waiting.total(RUNNER)
    return Stats(
        now=now,
        by_state=by_state,
        estimated=estimate is not None,
        live_by_kind=live_by_kind,
        lag_seconds=waiting.lag_seconds,
        last_5_minutes=last_5,
        last_hour=last_hour,
        slowest_kinds=slowest,
        throughput=_throughput(per_minute, now),
        per_minute=per_minute,
        runners=runners,
        stuck=live.filter(Holders.read(alias, now).stuck_rows()).count(),
        unhandled=int(unhandled["jobs"]),
        unhandled_wait_seconds=unhandled["oldest_seconds"],
        waiting={reason: waiting.total(reason) for reason in REASONS},
        waiting_by_queue=waiting.by_queue(),
        unserved=unserved_pairs(alias, holds),
        kinds_last_hour=kinds_last_hour,
        controls=controls,
    )


def _controls(using: str) -> list[dict[str, Any]]:
    """The usable control rows that pause something or set a limit."""
    from jobs.controls import problem

    return [
        {
            "scope": row.scope,
            "name": row.name,
            "paused": row.paused,
            "concurrency_limit": row.concurrency_limit,
            "by": row.changed_by,
            "since": row.changed_at,
        }
        for row in Control.objects.using(using).order_by("scope", "name")
        if problem(row) is None and (row.paused or row.concurrency_limit is not None)
    ]


def _live_counts(live: QuerySet[Job]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Live rows by state (every state present, settled ones 0) and by kind and state."""
    live_by_kind: dict[str, dict[str, int]] = {}
    by_state = {state.value: 0 for state in State}
    for live_row in live.values("kind", "state").annotate(n=Count("id")).order_by():
        live_by_kind.setdefault(live_row["kind"], {})[live_row["state"]] = live_row["n"]
        by_state[live_row["state"]] += live_row["n"]
    return by_state, live_by_kind


def _settled_counts(jobs: QuerySet[Job]) -> dict[str, int]:
    """Settled rows by state, counted exactly (where no estimate is used)."""
    settled = jobs.filter(state__in=SETTLED_STATES).values("state").annotate(n=Count("id"))
    return {counted["state"]: counted["n"] for counted in settled.order_by()}


def _last_hour(
    recent: QuerySet[Job], now: datetime
) -> tuple[dict[str, int], dict[str, int], dict[str, dict[str, int]], list[dict[str, Any]]]:
    """Settles of the last 5 minutes and of the last hour by state; each
    kind's done and failed of the hour (a cancel is not throughput); and the
    five kinds with the longest mean attempt, slowest first: one pass over
    the hour's settled rows (through `jobs_job_settled`), however many kinds."""
    last_hour = {state.value: 0 for state in SETTLED_STATES}
    last_5 = dict(last_hour)
    kinds: dict[str, dict[str, int]] = {}
    took: dict[str, list[float]] = {}  # kind: [seconds in all, attempts timed]
    duration = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    timed = Q(started_at__isnull=False)
    counted = recent.values("kind", "state").annotate(
        n=Count("id"),
        five=Count("id", filter=Q(finished_at__gte=now - timedelta(minutes=5))),
        timed=Count("id", filter=timed),
        mean=Avg(duration, filter=timed),
    )
    for row in counted.order_by():
        state, kind = row["state"], row["kind"]
        last_hour[state] += row["n"]
        last_5[state] += row["five"]
        if state in (State.DONE, State.FAILED):
            kinds.setdefault(kind, {"done": 0, "failed": 0})[state] = row["n"]
        if row["timed"]:
            mean = row["mean"]
            seconds = mean.total_seconds() if isinstance(mean, timedelta) else float(mean or 0)
            total = took.setdefault(kind, [0.0, 0])
            total[0] += seconds * row["timed"]
            total[1] += row["timed"]
    means = sorted(((-seconds / n, kind, int(n)) for kind, (seconds, n) in took.items()))[:5]
    slowest = [
        {"kind": kind, "mean_seconds": round(-mean, 3), "count": n} for mean, kind, n in means
    ]
    return last_5, last_hour, dict(sorted(kinds.items())), slowest


def _throughput(
    per_minute: dict[str, list[Minute]], now: datetime
) -> list[tuple[datetime, int, int]]:
    """The attempts done and failed per minute, every queue summed, oldest first."""
    hour = [[Minute(minute)] for minute in minutes.chart_minutes(now)]
    for column, queues in zip(hour, zip(*per_minute.values(), strict=True), strict=False):
        column += queues
    return [
        (column[0].minute, sum(m.done for m in column), sum(m.failed for m in column))
        for column in hour
    ]


def _runners(alias: str, now: datetime) -> list[RunnerInfo]:
    return [
        RunnerInfo(
            hostname=r.hostname,
            pid=r.pid,
            version=r.version,
            started_at=r.started_at,
            heartbeat_at=r.heartbeat_at,
            max_concurrent=r.max_concurrent,
            running=r.running_now(now),
            kinds=list(r.kinds),
            queues=list(r.queues) if r.queues else None,
            gone=r.is_gone(now),
            lane=r.lane_label,
            name=str(r),
        )
        for r in RunnerProcess.objects.using(alias).all()
    ]


def served_by_live_runners(using: str | None = None, now: datetime | None = None) -> Q:
    """The job rows some live runner would claim: of a kind it has a handler
    for, in a queue it serves (`RunnerInfo.serves`). Matches no row when
    no runner is live."""
    served = Holds.read(using, now).served_rows()
    return Q(pk__in=[]) if served is None else served
