"""Recording the runner's metrics off its loop.

A runner settles thousands of attempts a second; one Prometheus update per
job (a lock, a label lookup, and under a supervisor a write to a mapped
file, for each of four metrics) would be a cost of its own, paid on the
loop thread that every claim waits for. So the loop notes a pass's starts,
and a batch's settles, as one entry (the pass's list of jobs and its clock:
an append), and `flush` applies them together: one counter increment per
kind and queue, one histogram update per label and bucket, whatever the
number of jobs. While a runner holds the tally, a thread of its own flushes
every `FLUSH_EVERY_SECONDS`, so a scrape sees counts a fraction of a second
old; with none (a web process cancelling a running job) each note is
applied as it is made. The same few sums, per queue, go to the dashboard's
per-minute counts (`jobs.metrics.minutes`), which the heartbeat writes.

prometheus_client is imported with the instruments at the first flush, not
at import: it is a tenth of a runner's start, and a runner records nothing
before its first claim (`jobs.metrics`).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import functools
import itertools
import logging
import operator
import os
import threading
import traceback
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from django.utils import timezone

from jobs import log
from jobs.metrics import MULTIPROC_ENV, minutes
from jobs.metrics.buckets import WAIT_BUCKETS

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram


class _Job(Protocol):
    kind: str
    queue: str
    run_at: datetime
    created_at: datetime
    started_at: datetime | None


#: How often the tally's thread applies the notes while a runner holds it.
FLUSH_EVERY_SECONDS = 0.25

#: A note: each job's (kind, queue), the moment its wait or its attempt
#: began, the instant of the note, and the outcome its attempts settled as
#: (None for attempts that started). Only these are kept, never the jobs:
#: holding a quarter second's rows (their payloads, their dicts) until the
#: flush made every garbage collection meanwhile walk them.
#: For attempts that started, a second list: each job's `created_at`, of which
#: and its `run_at` the later is when it was due.
Note = tuple[
    list[tuple[str, str]], list[datetime | None], list[datetime] | None, datetime, str | None
]


class Tally:
    """The notes of one process's runners, waiting for the next `flush`."""

    def __init__(self) -> None:
        self._notes: collections.deque[Note] = collections.deque()
        self._lock = threading.Lock()
        #: How many runners have joined the tally: while none has, a note is
        #: applied as it is made.
        self._joined = 0
        self._stop = threading.Event()
        self._stop.set()  # no thread yet
        self._flusher: threading.Thread | None = None
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        #: Enqueues per (kind, queue) since the last flush.
        self._enqueued: collections.Counter[tuple[str, str]] = collections.Counter()

    def join(self) -> None:
        """A runner starts: its notes wait for the tally's thread."""
        with self._lock:
            self._joined += 1
            if self._stop.is_set():
                # A thread told to stop may not have yet: the new one has its own event.
                self._stop = threading.Event()
                self._flusher = threading.Thread(
                    target=self._flush_every, args=(self._stop,), name="jobs-metrics", daemon=True
                )
                self._flusher.start()

    def leave(self) -> None:
        """A runner stops: what it noted is applied now."""
        with self._lock:
            self._joined = max(0, self._joined - 1)
            if not self._joined:
                self._stop.set()
        self.flush()

    def _flush_every(self, stop: threading.Event) -> None:
        while not stop.wait(FLUSH_EVERY_SECONDS):
            self.flush()

    # -- notes, from any thread ------------------------------------------------

    def started(self, jobs: Sequence[_Job], now: datetime) -> None:
        """The attempts of `jobs` were claimed at `now`."""
        labels, run_ats = list(map(_kind_and_queue, jobs)), list(map(_run_at, jobs))
        self._note((labels, run_ats, list(map(_created_at, jobs)), now, None))

    def finished(self, jobs: Sequence[_Job], outcome: str, now: datetime) -> None:
        """The attempts of `jobs` settled at `now` as `outcome`."""
        labels, started_ats = list(map(_kind_and_queue, jobs)), list(map(_started_at, jobs))
        self._note((labels, started_ats, None, now, outcome))

    def enqueued(self, rows: Sequence[Any]) -> None:
        """`rows` (with `kind` and `queue`) were queued and committed: counted
        per kind and queue, at once while no runner holds the tally (a web
        process), else at its next flush (a runner's start-up enqueues, the
        schedules', then import nothing before its first claim)."""
        counts = collections.Counter(map(_kind_and_queue, rows))
        if self._joined:
            with self._lock:
                self._enqueued.update(counts)
        else:
            self._count_enqueued(counts)

    def _count_enqueued(self, counts: collections.Counter[tuple[str, str]]) -> None:
        enqueued = _instruments().enqueued
        for kind_and_queue, n in counts.items():
            self._child(enqueued, kind_and_queue).inc(n)

    def _note(self, note: Note) -> None:
        self._notes.append(note)
        if not self._joined:
            self.flush()

    # -- applying them ---------------------------------------------------------

    def flush(self) -> None:
        """Apply every note made so far; a failure is logged, never raised:
        metrics must not break the pass, the settle or the enqueue that noted."""
        try:
            self._apply()
        except Exception as error:
            flush_failed(error)

    def _apply(self) -> None:
        """Apply every note made so far, a few updates for the lot.

        The notes are joined first, per outcome, so that the arithmetic is
        mapped in C over every job since the last flush, not a pass's eight.
        """
        with self._lock:
            enqueued, self._enqueued = self._enqueued, collections.Counter()
        notes = _take(self._notes)
        if not notes and not enqueued:
            return
        instruments = _instruments()
        self._count_enqueued(enqueued)
        joined: dict[str | None, tuple[list[tuple[str, str]], list[Any], list[datetime]]] = {}
        for labels_of_jobs, moments, created, now, outcome in notes:
            into, since, nows = joined.setdefault(outcome, ([], [], []))
            into.extend(labels_of_jobs)
            since.extend(moments if created is None else _later(moments, created))
            nows.extend(itertools.repeat(now, len(moments)))
        for outcome, (labels_of_jobs, since, nows) in joined.items():
            labels = collections.Counter(labels_of_jobs)
            counted: list[tuple[str, int, int]] = []
            if outcome is None:
                for key, n in labels.items():
                    self._child(instruments.attempts_started, key).inc(n)
                    counted.append((key[1], minutes.STARTED, n))
                histogram, by = instruments.wait, 1
            else:
                column = _FINISHED_COLUMNS.get(outcome)
                for (kind, queue), n in labels.items():
                    self._child(instruments.attempts_finished, (kind, queue, outcome)).inc(n)
                    if column is not None:
                        counted.append((queue, column, n))
                histogram, by = instruments.attempt_duration, 0
            spread = _spread(labels, by, labels_of_jobs, _elapsed(nows, since))
            for label, values in spread.items():
                buckets = observe_many(self._child(histogram, (label,)), values)
                if outcome is None:  # the waits, per queue: the charts' latency
                    counted += [(label, minutes.FIRST_WAIT + i, n) for i, n in buckets.items()]
            if counted:  # none for notes of no job
                minutes.minutes.add(nows[-1], counted)

    def _child(self, metric: Counter | Histogram, labels: tuple[str, ...]) -> Any:
        """`metric.labels(*labels)`, kept: counters' and histograms' children
        are never removed, and the lookup takes a lock and checks the labels."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child


def flush_failed(error: Exception) -> None:
    """Log that metrics (the tally's, or the per-minute counts' save) could not
    be applied; called in the `except` that caught `error`, for its traceback."""
    log.event(
        "metrics_flush_failed",
        logging.ERROR,
        outcome="failure",
        error=repr(error),
        traceback=traceback.format_exc(),
    )


def runner_gauges(runner: str, running: int, free: int) -> None:
    """A runner's slots as its pass left them (written only when they change)."""
    kept = _runner_gauges.get(runner)
    if kept is None:
        instruments = _instruments()
        kept = _runner_gauges[runner] = [
            instruments.running.labels(runner),
            instruments.slots_free.labels(runner),
            None,
        ]
    if kept[2] != (running, free):
        kept[0].set(running)
        kept[1].set(free)
        kept[2] = (running, free)


def forget_runner(runner: str) -> None:
    """A runner stopped: its gauges go with it.

    Under a supervisor (prometheus_client's multiprocess mode) a series
    cannot be removed from the files (`remove` only warns so): it reads 0
    until the process exits, when the supervisor marks it dead and its
    live gauges leave the sums (`jobs.metrics.exposition.Children`).
    """
    kept = _runner_gauges.pop(runner, None)
    if os.environ.get(MULTIPROC_ENV):
        if kept is not None:
            kept[0].set(0)
            kept[1].set(0)
        return
    instruments = _instruments()
    for gauge in (instruments.running, instruments.slots_free):
        with contextlib.suppress(KeyError):
            gauge.remove(runner)


@functools.cache
def _instruments() -> ModuleType:
    """`jobs.metrics.instruments`, imported (with prometheus_client) at first
    use; cached, since an import statement for a package's module costs a
    call into importlib each time (the enqueue path calls this once a commit)."""
    from jobs.metrics import instruments

    return instruments


def observe_many(child: Any, values: list[float]) -> collections.Counter[int]:
    """`child.observe(v)` for each of `values` (`child` one histogram's
    labelled child), as one update per bucket that any of them falls in.

    prometheus_client has no bulk observe; this adds to the child's buckets
    and sum as `observe` would (a value goes in the first bucket whose upper
    bound it does not exceed), and falls back to one `observe` per value should
    a release change those internals (a test holds it to the one-by-one result).
    Returns how many values fell in each bucket, by its index.
    """
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            child.observe(value)
        return collections.Counter(map(functools.partial(bisect.bisect_left, _WAITS), values))
    per_bucket = collections.Counter(map(functools.partial(bisect.bisect_left, bounds), values))
    total.inc(sum(values))
    for index, n in per_bucket.items():
        buckets[index].inc(n)
    return per_bucket


#: The wait buckets with their overflow, as prometheus_client bounds them.
_WAITS = (*WAIT_BUCKETS, float("inf"))
#: The per-minute column each outcome counts in (none for a cancel or a release).
_FINISHED_COLUMNS = {
    "done": minutes.DONE,
    **dict.fromkeys(minutes.FAILED_OUTCOMES, minutes.FAILED),
}

_kind_and_queue = operator.attrgetter("kind", "queue")
_run_at = operator.attrgetter("run_at")
_created_at = operator.attrgetter("created_at")
_started_at = operator.attrgetter("started_at")


def _elapsed(nows: list[datetime], since: list[datetime | None]) -> list[float]:
    """Seconds from each of `since` to its instant in `nows`, never negative,
    mapped in C: this arithmetic is most of what a flush does. A date the
    row could not give (None) counts 0; one naive beside an aware one (USE_TZ
    off, where a row's dates can come back aware) is read in the current
    time zone, job by job."""
    try:
        seconds = list(map(_total_seconds, map(operator.sub, nows, since)))
    except TypeError:
        seconds = [_seconds_or_zero(now, moment) for now, moment in zip(nows, since, strict=True)]
    return list(map(max, seconds, itertools.repeat(0.0)))


def _seconds_or_zero(now: datetime, moment: datetime | None) -> float:
    if moment is None:
        return 0.0
    return (_aware(now) - _aware(moment)).total_seconds()


def _aware(moment: datetime) -> datetime:
    """`moment`, aware: a naive one is in the current time zone, as Django
    reads it with USE_TZ off (where a row's dates can come back aware)."""
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def _later(first: list[datetime | None], second: list[datetime]) -> list[datetime | None]:
    """The later of each pair, mapped in C; where one is None, the other (and
    a naive one beside an aware one is read as `_aware` reads it)."""
    try:
        return list(map(max, first, second))  # type: ignore[arg-type]
    except TypeError:
        return [_later_one(a, b) for a, b in zip(first, second, strict=True)]


def _later_one(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None or second is None:
        return second if first is None else first
    return max(first, second, key=_aware)


_total_seconds = timedelta.total_seconds


def _spread(
    labels: collections.Counter[tuple[str, str]],
    by: int,
    labels_of_jobs: list[tuple[str, str]],
    values: list[float],
) -> dict[str, list[float]]:
    """`values` (one per job) by each job's kind (`by` 0) or queue (`by` 1);
    when every job has one kind and queue, the usual case, at once."""
    if len(labels) == 1:
        [key] = labels
        return {key[by]: values}
    spread: dict[str, list[float]] = {}
    for labels_of_job, value in zip(labels_of_jobs, values, strict=True):
        spread.setdefault(labels_of_job[by], []).append(value)
    return spread


def _take(notes: collections.deque[Note]) -> list[Note]:
    """Pop what `notes` holds now (others may append meanwhile: those wait)."""
    taken = []
    try:
        for _ in range(len(notes)):
            taken.append(notes.popleft())
    except IndexError:  # another flush took the rest
        pass
    return taken


#: Each runner's two gauge children, looked up once (the lookup takes a
#: lock), and the values last written.
_runner_gauges: dict[str, list[Any]] = {}

#: The one tally of this process: every runner in it holds it while it runs;
#: `jobs.observers` notes into it from the settle paths.
tally = Tally()
