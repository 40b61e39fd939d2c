"""The benchmark's handlers: one that does nothing, so only the queue is
measured, and one that notes when its first line ran, so a driver in another
process can tell how long a job waited.

Registered only when asked (`BENCHMARK_HANDLERS`, a setting the project reads
from the variable of that name): the example project's own runner serves its
orders, not a benchmark's kinds it would otherwise claim from any database it
shares. `benchjobs` asks, for itself and for every process it starts.
"""

import os
import time
from typing import Any

from django.conf import settings

from jobs import Done, JobHandler, Retry, register
from jobs.models import Job

#: The setting, and the environment variable the project reads it from, that
#: makes a process serve the benchmark's kinds.
SETTING = "BENCHMARK_HANDLERS"

#: Every kind the benchmark queues starts with this; it deletes them afterwards.
PREFIX = "bench."
#: A job that does nothing.
NOOP = "bench.noop"
#: A job whose result is the wall-clock time its handler started.
STAMP = "bench.stamp"
#: A job whose first attempt fails and whose second succeeds.
RETRY_ONCE = "bench.retry_once"
#: A job that does nothing, of a kind the routing drain limits to 4 attempts
#: at once (in the database, for that part only: `jobs limit`).
LIMITED = "bench.limited"


def payload(n: int) -> dict[str, Any]:
    """What the as-met jobs carry: a few keys, as a real subject reference does."""
    return {"subject": 4242, "i": n, "tenant": "acme"}


class NoopHandler(JobHandler):
    kind = NOOP

    def run(self, job: Job) -> Done:
        return Done()


class StampHandler(JobHandler):
    kind = STAMP

    def run(self, job: Job) -> Done:
        # Wall-clock, not monotonic: the driver compares it with times taken
        # in other processes on the same machine.
        started = time.time()
        return Done(started)


class RetryOnceHandler(JobHandler):
    """Every job retries once: a drain of these pays for a retry's settle and
    its entry in the attempt record as well as for the done."""

    kind = RETRY_ONCE

    def run(self, job: Job) -> Done | Retry:
        if job.attempts == 1:
            return Retry("the first attempt fails on purpose")
        return Done()


class LimitedHandler(JobHandler):
    """A no-op: the routing drain's quarter whose kind it limits."""

    kind = LIMITED

    def run(self, job: Job) -> Done:
        return Done()


HANDLERS = (NoopHandler, StampHandler, RetryOnceHandler, LimitedHandler)


def serve(*, in_children: bool = False) -> None:
    """Register the benchmark's kinds in this process (twice is once); with
    `in_children`, in every process it starts from now too (they inherit the
    variable the project reads the setting from)."""
    if in_children:
        os.environ[SETTING] = "True"
    for handler in HANDLERS:
        register(handler)


if getattr(settings, SETTING, False):
    serve()
