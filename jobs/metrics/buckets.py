"""The histograms' bucket bounds, apart from the instruments: the per-minute
counts (`jobs.metrics.minutes`) and the tally count in the same buckets
without importing prometheus_client, which a runner loads only at its first
metrics flush."""

from __future__ import annotations

#: Attempt durations, from 5 ms to 6 hours: most jobs take milliseconds to
#: seconds, some minutes, a few (reports, exports) hours.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    900,
    3600,
    21600,
)

#: Waits from due to claim, from 1 ms (a runner that was idle) to an hour (a
#: backlog, or no runner at all).
WAIT_BUCKETS = (0.001, *DURATION_BUCKETS[:-1])
