"""Per-minute counts for the dashboard's live charts, kept by each runner process.

The tally (`jobs.metrics.tally`) already counts, at each flush (every
quarter second, on its own thread, never per job), the attempts started per
queue, those that ended per outcome, and each queue's waits per histogram
bucket. It adds those few numbers here too (`Minutes.add`: a dict update
per queue and bucket touched); the runner's heartbeat thread writes them
(`Minutes.save`): one upsert for every queue and minute touched since its
last beat (`jobs.store.minutes`), on its own connection, and once a minute
deletes the rows older than `KEEP`. The dashboard sums an hour of
them per minute and queue (`read`): at most 61 rows a queue, whatever the
jobs table holds.

The rows are keyed by process (`host:pid`), not by lane: the tally is the
process's, and one lock (`_saving`) keeps its lanes' heartbeats from writing
one row at once, so no write waits on another runner's.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Sum

from jobs.metrics.buckets import WAIT_BUCKETS
from jobs.models import MinuteCount, runner_name
from jobs.models.minutes import WAIT_COLUMNS
from jobs.store import minutes as store_minutes

#: A row's counts, in the order `Minutes` keeps them.
COLUMNS = ("started", "done", "failed", *WAIT_COLUMNS)
STARTED, DONE, FAILED, FIRST_WAIT = 0, 1, 2, 3
#: The outcomes counted as failed: the attempt ended in an error, whether
#: another attempt follows or not (a cancel or a release is no failure).
FAILED_OUTCOMES = frozenset({"retry", "failed", "timed_out"})
#: How long rows are kept: the chart's hour, and as long again for a
#: dashboard whose clock lags.
KEEP = timedelta(hours=2)
#: The minutes a chart shows, the current one last.
CHART_MINUTES = 60

#: A queue and minute's counts, in `COLUMNS` order.
Counts = list[int]


def minute_of(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


class Minutes:
    """One process's counts not yet written, per (minute, queue)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[datetime, str], Counts] = {}
        self._saving = threading.Lock()
        self._pruned: datetime | None = None

    def add(self, now: datetime, counted: Iterable[tuple[str, int, int]]) -> None:
        """Add each (queue, column index, n) of `counted` to `now`'s minute.

        A process that never saves (a web process noting an operator's
        cancel) keeps no more than `KEEP` of minutes: a new minute drops
        those older."""
        minute = minute_of(now)
        with self._lock:
            for queue, column, n in counted:
                row = self._counts.get((minute, queue))
                if row is None:
                    self._forget_before(minute - KEEP)
                    row = self._counts[minute, queue] = [0] * len(COLUMNS)
                row[column] += n

    def _forget_before(self, oldest: datetime) -> None:
        for key in [key for key in self._counts if key[0] < oldest]:
            del self._counts[key]

    def _take(self) -> dict[tuple[datetime, str], Counts]:
        with self._lock:
            taken, self._counts = self._counts, {}
        return taken

    def _put_back(self, taken: dict[tuple[datetime, str], Counts]) -> None:
        with self._lock:
            for key, counts in taken.items():
                row = self._counts.setdefault(key, [0] * len(COLUMNS))
                for index, n in enumerate(counts):
                    row[index] += n

    def save(self, using: str, now: datetime) -> int:
        """Add what was counted since the last save to this process's rows,
        and, having written some, delete rows older than `KEEP` (once a
        minute): the heartbeat's call. Returns the rows written. On a
        failure the counts are kept for the next save, and the error raised."""
        with self._saving:
            taken = self._take()
            try:
                written = _write(using, taken)
            except BaseException:
                self._put_back(taken)
                raise
            minute = minute_of(now)
            if written and self._pruned != minute:
                prune(using, now)
                self._pruned = minute
            return written


def _write(using: str, taken: dict[tuple[datetime, str], Counts]) -> int:
    """One upsert for every (minute, queue) counted (`jobs.store.minutes`)."""
    runner = runner_name(socket.gethostname(), os.getpid())
    rows = [(minute, queue, counts) for (minute, queue), counts in sorted(taken.items())]
    store_minutes.add(using, runner, rows)
    return len(rows)


def prune(using: str | None, now: datetime) -> int:
    """Delete the rows of minutes older than `KEEP` before `now`."""
    return store_minutes.prune(using or DEFAULT_DB_ALIAS, minute_of(now) - KEEP)


@dataclass(frozen=True)
class Minute:
    """One queue's minute, summed over every runner process."""

    minute: datetime
    started: int = 0
    done: int = 0
    failed: int = 0
    #: Seconds from due to start, by the histogram: None with nothing started.
    p50: float | None = None
    p95: float | None = None


def read(using: str | None, now: datetime) -> dict[str, list[Minute]]:
    """Per queue that counted anything in the last `CHART_MINUTES` minutes
    (`now`'s the last), each of those minutes, oldest first: one query,
    summed by the database per minute and queue."""
    minutes = chart_minutes(now)
    summed = (
        MinuteCount.objects.using(using or DEFAULT_DB_ALIAS)
        .filter(minute__gte=minutes[0], minute__lte=minutes[-1])
        .values("minute", "queue")
        .annotate(**{f"n_{column}": Sum(column) for column in COLUMNS})
        .order_by()
    )
    found: dict[str, dict[datetime, Minute]] = {}
    for summed_row in summed:
        row: dict[str, Any] = dict(summed_row)
        counts = [row[f"n_{column}"] or 0 for column in COLUMNS]
        waits = counts[FIRST_WAIT:]
        found.setdefault(row["queue"], {})[minute_of(row["minute"])] = Minute(
            minute=row["minute"],
            started=counts[STARTED],
            done=counts[DONE],
            failed=counts[FAILED],
            p50=quantile(waits, 0.5),
            p95=quantile(waits, 0.95),
        )
    return {
        queue: [by_minute.get(minute, Minute(minute)) for minute in minutes]
        for queue, by_minute in sorted(found.items())
    }


def chart_minutes(now: datetime) -> list[datetime]:
    """The minutes a chart shows at `now`, oldest first, `now`'s the last."""
    last = minute_of(now)
    return [last - timedelta(minutes=back) for back in range(CHART_MINUTES - 1, -1, -1)]


def quantile(buckets: list[int], q: float) -> float | None:
    """The `q` quantile of a histogram counted in `WAIT_BUCKETS` (and one
    bucket over them), read as Prometheus's `histogram_quantile` reads it:
    linear within the bucket it falls in; the last bound for the overflow."""
    total = sum(buckets)
    if not total:
        return None
    rank = q * total
    seen = 0
    for index, n in enumerate(buckets):
        if n and seen + n >= rank:
            if index >= len(WAIT_BUCKETS):
                return float(WAIT_BUCKETS[-1])
            lower = WAIT_BUCKETS[index - 1] if index else 0.0
            return lower + (WAIT_BUCKETS[index] - lower) * (rank - seen) / n
        seen += n
    return float(WAIT_BUCKETS[-1])


#: The one accumulator of this process: the tally adds to it, the heartbeat saves it.
minutes = Minutes()
