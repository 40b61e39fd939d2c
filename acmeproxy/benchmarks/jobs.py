"""The benchmark's handler: a job that does nothing, so only the queue is measured."""

from jobs import Done, JobHandler, register
from jobs.models import Job

#: The kind of every job the benchmark queues; it deletes them afterwards.
NOOP = "bench.noop"


@register
class NoopHandler(JobHandler):
    kind = NOOP

    def run(self, job: Job) -> Done:
        return Done()
