"""Enqueue rates: `enqueue` one per transaction and `enqueue_many` in one call,
through the public API, no runner running.

As met, each job carries the bench payload, which `enqueue` validates and
encodes as it would a real one; the favourable figures queue empty payloads,
as the old benchmark did. The raw loops they are read against are in
`ceiling`. Each runs with `DEBUG` off, as in a deployed web process, whatever
the benchmark's own settings say; the one-per-transaction figure is taken
again with Django's default `DEBUG = True` (runserver's), where Django lists
each insert in the request's query log, and pays for formatting it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.measure import (
    AS_MET,
    FAVOURABLE,
    Result,
    latency_summary,
    per_second,
)
from acmeproxy.benchmarks.jobs import NOOP, payload
from jobs import JobSpec, enqueue, enqueue_many


@contextmanager
def debug(on: bool) -> Iterator[None]:
    """Django's `DEBUG` as asked for the statements inside (Django reads it at
    each cursor), restored afterwards."""
    before = settings.DEBUG
    settings.DEBUG = on
    try:
        yield
    finally:
        settings.DEBUG = before


def one_per_transaction(count: int, *, with_payload: bool = True, debug_on: bool = False) -> Result:
    """`count` `enqueue` calls in autocommit, each its own transaction; the rate
    (building each spec included, as the raw loop builds its row) and the
    distribution of one call's duration."""
    stage.clean()
    calls = []
    with debug(debug_on):
        started = time.perf_counter()
        for n in range(count):
            spec = JobSpec.now(NOOP, f"e{n}").with_payload(payload(n) if with_payload else {})
            before = time.perf_counter()
            enqueue(spec)
            calls.append((time.perf_counter() - before) * 1000)
        elapsed = time.perf_counter() - started
    stage.clean()
    summary = latency_summary(calls)
    numbers = {
        "jobs": count,
        "jobs_per_second": per_second(count, elapsed),
        "one_call_ms": {"p50": summary["p50"], "p99": summary["p99"]},
    }
    if debug_on:
        return Result(
            "enqueue.debug", "the same, with DEBUG=True (the insert logged)", AS_MET, numbers
        )
    if with_payload:
        return Result(
            "enqueue.as_met", "enqueue, one per transaction, payload jobs", AS_MET, numbers
        )
    return Result(
        "enqueue.empty", "enqueue, one per transaction (empty payloads)", FAVOURABLE, numbers
    )


def many(count: int, *, with_payload: bool = True) -> Result:
    """One `enqueue_many` call of `count` specs, building the specs included."""
    stage.clean()
    with debug(False):
        started = time.perf_counter()
        queued = enqueue_many(
            JobSpec.now(NOOP, f"m{n}").with_payload(payload(n) if with_payload else {})
            for n in range(count)
        )
        elapsed = time.perf_counter() - started
    stage.clean()
    numbers = {"jobs": sum(queued), "jobs_per_second": per_second(count, elapsed)}
    if with_payload:
        return Result(
            "enqueue_many.as_met", f"enqueue_many of {count:,}, payload jobs", AS_MET, numbers
        )
    return Result(
        "enqueue_many.empty", f"enqueue_many of {count:,} (empty payloads)", FAVOURABLE, numbers
    )
