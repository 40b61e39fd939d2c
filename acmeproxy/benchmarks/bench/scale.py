"""Whether a claim stays cheap as history grows: the median claim of 8 with an
empty table, then beside a million settled rows and a hundred thousand
scheduled a month out across 10 queues and 21 priorities (half of them above
the ready rows', so the claim passes ten priorities holding only later
work). Through the store's own `claim`, in this process.

Its setup vacuums and analyzes (and compacts the table afterwards, so the
next run does not insert into a bloated one): the question is the claim's
cost against history, not the table's state after a burst.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.measure import SCALE, Result
from jobs.store import for_database
from jobs.store.admission import Admission

KIND = "bench.scale"
HISTORY = "bench.history"


def _claim_cost(samples: int) -> float:
    """Median seconds of one claim of 8 rows, over `samples` claims."""
    store = for_database()
    lease = {KIND: timedelta(minutes=5)}
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        claims = store.claim(Admission(timezone.now(), lease, 8))
        times.append(time.perf_counter() - started)
        assert len(claims) == 8, "enough ready rows for every sample"
    return statistics.median(times)


def claim_against_history(samples: int, settled: int, future: int) -> Result:
    label = "claim of 8, median: empty table vs beside history"
    if connection.vendor not in stage.HISTORY_SQL:
        reason = f"no history generator for {connection.vendor}"
        return Result("scale", label, SCALE, skipped=reason)
    stage.clean_and_vacuum()
    stage.insert_ready(KIND, samples * 8, with_payload=False)
    stage.analyze()
    empty = _claim_cost(samples)
    stage.clean_and_vacuum()
    stage.history(HISTORY, settled, future)
    stage.insert_ready(KIND, samples * 8, with_payload=False)
    stage.analyze()
    full = _claim_cost(samples)
    stage.clean_and_vacuum(compact=True)
    return Result(
        "scale",
        label,
        SCALE,
        {
            "empty_ms": round(empty * 1000, 3),
            "with_history_ms": round(full * 1000, 3),
            "settled_rows": settled,
            "future_rows": future,
            "ratio": round(full / empty, 2),
        },
    )
