"""The queue's numbers, computed once for the admin dashboard and `manage.py jobs stats`.

Every query here stays cheap on a table with a million settled rows: live
rows are counted through the `jobs_job_ready` index, recent settles through
`jobs_job_settled` (a range on `finished_at`), and nothing scans history
except the settled counts by state, which PostgreSQL estimates from its
statistics.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Min, Q, QuerySet
from django.db.models.functions import TruncMinute
from django.utils import timezone

from jobs.holding import Holders
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

    def serves(self) -> Q:
        """The job rows it would claim (given they are ready): of its kinds,
        and of its queues when it serves only some."""
        rows = Q(kind__in=self.kinds)
        return rows & Q(queue__in=self.queues) if self.queues else rows

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
    #: Seconds the oldest ready job of a kind some live runner handles has
    #: waited past its run_at, paused queues and kinds left out; 0 when none
    #: waits. Adding runners shortens it.
    lag_seconds: float
    #: Settles in the last 5 minutes and the last hour, by state.
    last_5_minutes: dict[str, int]
    last_hour: dict[str, int]
    #: Kinds by mean attempt duration over the last hour, slowest first.
    slowest_kinds: list[dict[str, Any]]
    #: Settles per minute over the last hour, oldest first: [minute, done, failed].
    throughput: list[tuple[datetime, int, int]]
    runners: list[RunnerInfo] = field(default_factory=list)
    #: Running rows nobody is working on (`jobs.holding`): a runner gone
    #: silent, or a lease expired. Counted in `by_state["running"]` too.
    stuck: int = 0
    #: Ready rows of kinds no live runner handles, which no added runner of
    #: today's deploy would run: how many, and the oldest one's wait.
    unhandled: int = 0
    unhandled_wait_seconds: float = 0.0
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
    now = now or timezone.now()
    jobs = Job.objects.using(alias)
    live = jobs.filter(LIVE_ROWS)
    by_state, live_by_kind = _live_counts(live)
    estimate = _settled_estimates(alias)
    by_state.update(_settled_counts(jobs) if estimate is None else estimate)
    recent = jobs.filter(SETTLED_ROWS, finished_at__gte=now - timedelta(hours=1))
    last_5, last_hour, throughput = _recent_settles(recent, now)
    runners = _runners(alias, now)
    served = _served(runners)
    ready = live.filter(state=State.QUEUED, run_at__lte=now)
    controls = _controls(alias)
    unhandled, unhandled_wait = _waiting(ready.exclude(served), now)
    return Stats(
        now=now,
        by_state=by_state,
        estimated=estimate is not None,
        live_by_kind=live_by_kind,
        lag_seconds=_waiting(ready.filter(served).exclude(_paused(controls)), now, count=False)[1],
        last_5_minutes=last_5,
        last_hour=last_hour,
        slowest_kinds=_slowest_kinds(recent),
        throughput=throughput,
        runners=runners,
        stuck=live.filter(Holders.read(alias, now).stuck_rows()).count(),
        unhandled=unhandled,
        unhandled_wait_seconds=unhandled_wait,
        kinds_last_hour=_kinds_last_hour(recent),
        controls=controls,
    )


def held_by_pauses(using: str | None = None) -> Q:
    """The rows the operator's pauses hold back on `using` (an empty Q when
    nothing is paused)."""
    return _paused(_controls(using or DEFAULT_DB_ALIAS))


def _paused(controls: list[dict[str, Any]]) -> Q:
    """The rows a pause in `controls` holds back: waiting by an operator's
    choice, not for want of runners, so they are not the queue's lag."""
    held = Q()
    for control in controls:
        if control["paused"]:
            held |= Q(**{control["scope"]: control["name"]})
    return held


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


def _waiting(ready: QuerySet[Job], now: datetime, *, count: bool = True) -> tuple[int, float]:
    """How many of `ready` there are (with `count`, else 0), and the seconds the
    oldest has waited past its `run_at` (0 when none)."""
    found = ready.aggregate(oldest=Min("run_at"), **({"n": Count("id")} if count else {}))
    wait = (now - found["oldest"]).total_seconds() if found["oldest"] else 0.0
    return found.get("n", 0), wait


def _kinds_last_hour(recent: QuerySet[Job]) -> dict[str, dict[str, int]]:
    """Done and failed settles of the last hour, per kind (cancels are not throughput)."""
    kinds: dict[str, dict[str, int]] = {}
    for row in (
        recent.filter(state__in=[State.DONE, State.FAILED])
        .values("kind", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        kinds.setdefault(row["kind"], {"done": 0, "failed": 0})[row["state"]] = row["n"]
    return dict(sorted(kinds.items()))


def _recent_settles(
    recent: QuerySet[Job], now: datetime
) -> tuple[dict[str, int], dict[str, int], list[tuple[datetime, int, int]]]:
    """Settles of the last 5 minutes and the last hour by state, and per minute
    over the hour (61 minutes, oldest first: [minute, done, failed])."""
    last_hour = {state.value: 0 for state in SETTLED_STATES}
    last_5 = dict(last_hour)
    per_minute: dict[datetime, list[int]] = {}
    for bucket in (
        recent.annotate(minute=TruncMinute("finished_at"))
        .values("minute", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        last_hour[bucket["state"]] += bucket["n"]
        minute = bucket["minute"]
        if minute >= now - timedelta(minutes=5):
            last_5[bucket["state"]] += bucket["n"]
        counts = per_minute.setdefault(minute, [0, 0])
        # A cancellation is an operator's decision, not a failure: a cancel
        # storm must not read as a failure spike.
        if bucket["state"] == State.DONE:
            counts[0] += bucket["n"]
        elif bucket["state"] == State.FAILED:
            counts[1] += bucket["n"]
    start = (now - timedelta(hours=1)).replace(second=0, microsecond=0)
    throughput = []
    for step in range(61):
        minute = start + timedelta(minutes=step)
        done, failed = per_minute.get(minute, [0, 0])
        throughput.append((minute, done, failed))
    return last_5, last_hour, throughput


def _slowest_kinds(recent: QuerySet[Job]) -> list[dict[str, Any]]:
    """The five kinds with the longest mean attempt over the last hour, slowest first."""
    duration = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    slowest = []
    for kind_row in (
        recent.filter(started_at__isnull=False)
        .values("kind")
        .annotate(mean=Avg(duration), n=Count("id"))
        .order_by("-mean")[:5]
    ):
        mean = kind_row["mean"]
        seconds = mean.total_seconds() if isinstance(mean, timedelta) else float(mean or 0)
        slowest.append(
            {"kind": kind_row["kind"], "mean_seconds": round(seconds, 3), "count": kind_row["n"]}
        )
    return slowest


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
    return _served(_runners(using or DEFAULT_DB_ALIAS, now or timezone.now()))


def _served(runners: list[RunnerInfo]) -> Q:
    served = Q(pk__in=[])
    for runner in runners:
        if not runner.gone:
            served |= runner.serves()
    return served


def kinds_without_runner(using: str | None = None, now: datetime | None = None) -> list[str]:
    """Kinds with live jobs that no live runner would claim: none has a
    handler for the kind, or none that has serves the job's queue."""
    alias = using or DEFAULT_DB_ALIAS
    waiting = (
        Job.objects.using(alias)
        .filter(LIVE_ROWS)
        .exclude(served_by_live_runners(alias, now))
        .values_list("kind", flat=True)
        .distinct()
        .order_by()
    )
    return sorted(waiting)
