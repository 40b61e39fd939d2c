"""The benchmark's handlers: one that does nothing, so only the queue is
measured, and one that notes when its first line ran, so a driver in another
process can tell how long a job waited."""

import time
from typing import Any

from jobs import Done, JobHandler, Retry, register
from jobs.models import Job

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


@register
class NoopHandler(JobHandler):
    kind = NOOP

    def run(self, job: Job) -> Done:
        return Done()


@register
class StampHandler(JobHandler):
    kind = STAMP

    def run(self, job: Job) -> Done:
        # Wall-clock, not monotonic: the driver compares it with times taken
        # in other processes on the same machine.
        started = time.time()
        return Done(started)


@register
class RetryOnceHandler(JobHandler):
    """Every job retries once: a drain of these pays for a retry's settle and
    its entry in the attempt record as well as for the done."""

    kind = RETRY_ONCE

    def run(self, job: Job) -> Done | Retry:
        if job.attempts == 1:
            return Retry("the first attempt fails on purpose")
        return Done()


@register
class LimitedHandler(JobHandler):
    """A no-op: the routing drain's quarter whose kind it limits."""

    kind = LIMITED

    def run(self, job: Job) -> Done:
        return Done()
