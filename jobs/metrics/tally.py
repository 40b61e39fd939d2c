"""Recording the runner's metrics a pass at a time.

A runner settles thousands of attempts a second; one Prometheus update per
job (a lock, a label lookup, and under a supervisor a write to a mapped
file, for each of four metrics) would be a cost of its own. So what happens
is noted as plain tuples (an append, from any thread), and `flush` applies
them together: one counter increment per kind and queue, one histogram
update per label and bucket, whatever the number of jobs. The runner's loop
flushes at the end of a pass, at most every `FLUSH_EVERY_SECONDS`, and when
it goes idle (`jobs.runner.producer`), so a scrape sees counts at most a
fraction of a second old; outside a runner (a web process cancelling a
running job) each note is applied at once.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import Counter, Histogram

from jobs.metrics import instruments


class _Job(Protocol):
    kind: str
    queue: str
    run_at: datetime
    created_at: datetime
    started_at: datetime | None


#: The most often a busy runner applies its notes (`Tally.flush_if_due`); an
#: idle one applies them as it goes idle.
FLUSH_EVERY_SECONDS = 0.25

#: (kind, queue, outcome, seconds the attempt took, or None when none ran).
Finished = tuple[str, str, str, float | None]


class Tally:
    """The notes of one process's runners, waiting for the next `flush`."""

    def __init__(self) -> None:
        self._started: collections.deque[tuple[str, str, float]] = collections.deque()
        self._finished: collections.deque[Finished] = collections.deque()
        self._lock = threading.Lock()
        #: How many runners of this process flush per pass: while none does,
        #: a note is applied as it is made.
        self._flushers = 0
        self._flushed_at = 0.0
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def hold(self) -> None:
        """A runner starts flushing once per pass."""
        with self._lock:
            self._flushers += 1

    def release(self) -> None:
        """A runner stops flushing: apply what it left."""
        with self._lock:
            self._flushers = max(0, self._flushers - 1)
        self.flush()

    # -- notes, from any thread ------------------------------------------------

    def started(self, jobs: Iterable[_Job], now: datetime) -> None:
        """The attempts of `jobs` were claimed at `now`."""
        self._started.extend(
            (job.kind, job.queue, (now - max(job.run_at, job.created_at)).total_seconds())
            for job in jobs
        )
        self._unless_held()

    def finished(self, job: _Job, outcome: str, now: datetime, *, ran: bool = True) -> None:
        """An attempt of `job` settled at `now` as `outcome`; `ran` False for
        a cancel that found no attempt running (counted, with no duration)."""
        seconds = _since(job.started_at, now) if ran else None
        self._finished.append((job.kind, job.queue, outcome, seconds))
        self._unless_held()

    def all_done(self, jobs: Iterable[_Job], now: datetime) -> None:
        """The attempts of `jobs`, a batch, settled `done` at `now`."""
        self._finished.extend(
            (job.kind, job.queue, "done", _since(job.started_at, now)) for job in jobs
        )
        self._unless_held()

    def _unless_held(self) -> None:
        if not self._flushers:
            self.flush()

    # -- applying them ---------------------------------------------------------

    def flush_if_due(self) -> None:
        """`flush`, unless the last was less than `FLUSH_EVERY_SECONDS` ago: a
        busy runner's passes come thousands a second, its scrapes every 15."""
        if time.monotonic() - self._flushed_at >= FLUSH_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Apply every note made so far, a few updates for the lot."""
        self._flushed_at = time.monotonic()
        started = _take(self._started)
        finished = _take(self._finished)
        if started:
            counts: dict[tuple[str, str], int] = {}
            waits: dict[str, list[float]] = {}
            for kind, queue, waited in started:
                counts[kind, queue] = counts.get((kind, queue), 0) + 1
                waits.setdefault(queue, []).append(waited if waited > 0.0 else 0.0)
            for labels, n in counts.items():
                self._child(instruments.attempts_started, labels).inc(n)
            for queue, values in waits.items():
                observe_many(self._child(instruments.wait, (queue,)), values)
        if finished:
            outcomes: dict[tuple[str, str, str], int] = {}
            durations: dict[str, list[float]] = {}
            for kind, queue, outcome, seconds in finished:
                outcomes[kind, queue, outcome] = outcomes.get((kind, queue, outcome), 0) + 1
                if seconds is not None:
                    durations.setdefault(kind, []).append(seconds)
            for key, n in outcomes.items():
                self._child(instruments.attempts_finished, key).inc(n)
            for kind, values in durations.items():
                observe_many(self._child(instruments.attempt_duration, (kind,)), values)

    def _child(self, metric: Counter | Histogram, labels: tuple[str, ...]) -> Any:
        """`metric.labels(*labels)`, kept: counters' and histograms' children
        are never removed, and the lookup takes a lock and checks the labels."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child


def runner_gauges(runner: str, running: int, free: int) -> None:
    """A runner's slots as its pass left them."""
    children = _runner_children.get(runner)
    if children is None:
        children = _runner_children[runner] = (
            instruments.running.labels(runner),
            instruments.slots_free.labels(runner),
        )
    children[0].set(running)
    children[1].set(free)


def forget_runner(runner: str) -> None:
    """A runner stopped: its gauges go with it."""
    _runner_children.pop(runner, None)
    for gauge in (instruments.running, instruments.slots_free):
        with contextlib.suppress(KeyError):
            gauge.remove(runner)


def observe_many(child: Any, values: list[float]) -> None:
    """`child.observe(v)` for each of `values` (`child` one histogram's
    labelled child), as one update per bucket that any of them falls in.

    prometheus_client has no bulk observe; this adds to the child's buckets
    and sum as `observe` would (a value goes in the first bucket whose upper
    bound it does not exceed), and falls back to one `observe` per value should
    a release change those internals (a test holds it to the one-by-one result).
    """
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            child.observe(value)
        return
    if len(values) == 1:
        total.inc(values[0])
        buckets[bisect.bisect_left(bounds, values[0])].inc(1)
        return
    per_bucket: dict[int, int] = {}
    for value in values:
        index = bisect.bisect_left(bounds, value)
        per_bucket[index] = per_bucket.get(index, 0) + 1
    total.inc(sum(values))
    for index, n in per_bucket.items():
        buckets[index].inc(n)


def _since(started_at: datetime | None, now: datetime) -> float:
    return 0.0 if started_at is None else max(0.0, (now - started_at).total_seconds())


def _take(notes: collections.deque[Any]) -> list[Any]:
    """Pop what `notes` holds now (others may append meanwhile: those wait)."""
    taken = []
    try:
        for _ in range(len(notes)):
            taken.append(notes.popleft())
    except IndexError:  # another flush took the rest
        pass
    return taken


#: Each runner's two gauge children, looked up once (the lookup takes a lock).
_runner_children: dict[str, tuple[Any, Any]] = {}

#: The one tally of this process: every runner in it notes into it and
#: flushes it; `jobs.observers` notes into it from the settle paths.
tally = Tally()
