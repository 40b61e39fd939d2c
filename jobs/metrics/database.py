"""The gauges read from the table, once per scrape.

Each scrape asks the database what the dashboard asks, through the same
function (`jobs.waiting.backlog`): the queued rows per queue and per what
holds them (`jobs.waiting`), with each queue's lag over its due rows
whatever holds them; the stuck rows (as the dashboard's "stuck"), and the
runners heard from recently (a handful of rows). Settled history is never
read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs.holding import Holders
from jobs.models import LIVE_ROWS, Job
from jobs.store import for_database
from jobs.waiting import REASONS, backlog


@dataclass
class TableGauges:
    """What the table holds at `now`."""

    now: datetime
    #: Due queued rows per queue, whatever holds them, every queue a live row
    #: names or `DEFAULT_QUEUE`, 0 where none is due.
    ready: dict[str, int] = field(default_factory=dict)
    #: Per queue, seconds the oldest due row has waited past its `run_at`,
    #: whatever holds it; 0 when none is due.
    lag_seconds: dict[str, float] = field(default_factory=dict)
    #: Per queue and reason (`jobs.waiting.REASONS`), the queued rows it holds.
    waiting: dict[str, dict[str, int]] = field(default_factory=dict)
    stuck: int = 0
    live_runners: int = 0


def read(using: str | None = None, now: datetime | None = None) -> TableGauges:
    """The gauges on database `using` at `now`."""
    alias = using or DEFAULT_DB_ALIAS
    now = now or timezone.now()
    with for_database(alias).screen_reads():
        found = backlog(alias, now)
    gauges = TableGauges(now=now, ready=dict(found.due), waiting=found.jobs)
    gauges.lag_seconds = {queue: found.lag(queue) for queue in found.due}
    holders = Holders.read(alias, now)
    gauges.stuck = Job.objects.using(alias).filter(LIVE_ROWS).filter(holders.stuck_rows()).count()
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
            "jobs_ready",
            "Jobs due and not running, per queue, whatever holds them "
            "(jobs_waiting_jobs says what).",
            labels=["queue"],
        )
        lag = GaugeMetricFamily(
            "jobs_queue_lag_seconds",
            "Seconds the oldest due job of a queue has waited past its run_at, whatever holds "
            "it: no runner, a full limit, a pause, or only busy slots.",
            labels=["queue"],
        )
        waiting = GaugeMetricFamily(
            "jobs_waiting_jobs",
            "Queued jobs per queue by what holds them, each under the first of: schedule "
            "(disabled), run_at (not due), pause, runner (none live serves its kind in its "
            "queue), limit (its kind's concurrency limit is full), ready (only busy slots).",
            labels=["queue", "reason"],
        )
        for queue, n in gauges.ready.items():
            ready.add_metric([queue], n)
            lag.add_metric([queue], gauges.lag_seconds[queue])
            for reason in REASONS:
                waiting.add_metric([queue, reason], gauges.waiting[queue][reason])
        yield ready
        yield lag
        yield waiting
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
