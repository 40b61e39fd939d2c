"""The gauges read from the table, once per scrape.

Each scrape asks the database three questions that never read settled
history: the ready rows per queue with the oldest one's `run_at` (one pass
over the live rows, as the dashboard counts them), the stuck rows (as
the dashboard's "stuck"), and the runners heard from recently (a handful of
rows). Settled history is never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs.holding import Holders
from jobs.models import LIVE_ROWS, Job, State
from jobs.spec import DEFAULT_QUEUE
from jobs.stats import held_by_pauses


@dataclass
class TableGauges:
    """What the table holds at `now`."""

    now: datetime
    #: Ready rows (queued, due) per queue, every queue a live row names or
    #: `DEFAULT_QUEUE`, 0 where none is ready.
    ready: dict[str, int] = field(default_factory=dict)
    #: Per queue, seconds the oldest ready row has waited past its `run_at`,
    #: rows held back by an operator's pause left out; 0 when none waits.
    lag_seconds: dict[str, float] = field(default_factory=dict)
    stuck: int = 0
    live_runners: int = 0


def read(using: str | None = None, now: datetime | None = None) -> TableGauges:
    """The gauges on database `using` at `now`."""
    alias = using or DEFAULT_DB_ALIAS
    now = now or timezone.now()
    live = Job.objects.using(alias).filter(LIVE_ROWS)
    due = Q(state=State.QUEUED, run_at__lte=now)
    gauges = TableGauges(now=now, ready={DEFAULT_QUEUE: 0}, lag_seconds={DEFAULT_QUEUE: 0.0})
    oldest = {}
    per_queue = live.values("queue").annotate(
        n=Count("id", filter=due), oldest=Min("run_at", filter=due)
    )
    for row in per_queue.order_by("queue"):
        gauges.ready[row["queue"]] = row["n"]
        gauges.lag_seconds[row["queue"]] = 0.0
        if row["oldest"] is not None:
            oldest[row["queue"]] = row["oldest"]
    paused = held_by_pauses(alias)
    if paused and oldest:  # a pause hides rows from the lag: read it without them
        oldest = dict(
            live.filter(due)
            .exclude(paused)
            .values("queue")
            .annotate(oldest=Min("run_at"))
            .order_by()
            .values_list("queue", "oldest")
        )
    for queue, first in oldest.items():
        gauges.lag_seconds[queue] = max(0.0, (now - first).total_seconds())
    holders = Holders.read(alias, now)
    gauges.stuck = live.filter(holders.stuck_rows()).count()
    gauges.live_runners = len(holders.live)
    return gauges


class TableCollector(Collector):
    """The table's gauges for a Prometheus registry, read at each scrape.

    A scrape served by its own thread (prometheus_client's HTTP server) opens
    its own connection; it is closed when the read is done, so an endpoint
    scraped every 15 seconds does not keep a connection per request thread.
    """

    def __init__(self, using: str | None = None, *, close_connection: bool = False) -> None:
        self.using = using or DEFAULT_DB_ALIAS
        self.close_connection = close_connection

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            gauges = read(self.using)
        finally:
            if self.close_connection:
                connections[self.using].close()
        ready = GaugeMetricFamily(
            "jobs_ready", "Jobs due and waiting for a runner, per queue.", labels=["queue"]
        )
        lag = GaugeMetricFamily(
            "jobs_queue_lag_seconds",
            "Seconds the oldest ready job of a queue has waited past its run_at "
            "(paused queues and kinds left out).",
            labels=["queue"],
        )
        for queue, n in gauges.ready.items():
            ready.add_metric([queue], n)
            lag.add_metric([queue], gauges.lag_seconds[queue])
        yield ready
        yield lag
        yield GaugeMetricFamily(
            "jobs_stuck",
            "Running jobs nobody works on: their runner went silent or their lease expired.",
            value=gauges.stuck,
        )
        yield GaugeMetricFamily(
            "jobs_live_runners",
            "Runners (lanes) heard from within the staleness window.",
            value=gauges.live_runners,
        )
