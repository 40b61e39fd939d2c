"""The `MinuteCount` row: what one runner process did in one minute for one queue.

The dashboard's live charts (jobs started, done, failed per minute, and the
wait from due to start, p50 and p95) read these rows, never the jobs table:
an hour is at most 60 rows per queue once summed per minute, whatever the
table holds. Each runner process adds to its own rows from the counts its
metrics tally already keeps (`jobs.metrics.minutes`), at its heartbeat, so a
job costs the runner nothing more; rows older than `KEEP` are deleted by
the runners as they write.
"""

from __future__ import annotations

from django.db import models

from jobs.metrics.buckets import WAIT_BUCKETS
from jobs.models.runners import RUNNER_NAME_MAX_LENGTH
from jobs.spec import QUEUE_NAME_MAX_LENGTH

#: The wait histogram's columns: `wait_<i>` counts the claims whose wait from
#: due was at most `WAIT_BUCKETS[i]` seconds and more than the bound before;
#: the last, the waits over every bound. The tally's own buckets, so that
#: counting a claim here costs no comparison more.
WAIT_COLUMNS = tuple(f"wait_{index}" for index in range(len(WAIT_BUCKETS) + 1))


class MinuteCount(models.Model):
    """Counts of one runner process, for one queue, in one minute."""

    minute = models.DateTimeField(help_text="The minute counted, from its first second.")
    queue = models.CharField(max_length=QUEUE_NAME_MAX_LENGTH)
    runner = models.CharField(
        max_length=RUNNER_NAME_MAX_LENGTH, help_text="The runner process: host:pid."
    )
    started = models.PositiveIntegerField(default=0, help_text="Attempts claimed.")
    done = models.PositiveIntegerField(default=0, help_text="Attempts that ended done.")
    failed = models.PositiveIntegerField(
        default=0, help_text="Attempts that ended in an error: retried, timed out or failed."
    )
    # One column per bucket (`WAIT_COLUMNS`), so that the database sums an
    # hour's histograms per minute and queue: a JSON list could not be summed.
    for _column in WAIT_COLUMNS:
        locals()[_column] = models.PositiveIntegerField(default=0)
    del _column

    class Meta:
        verbose_name = "minute count"
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "queue", "runner"], name="jobs_minutecount_minute_queue_runner"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.runner} {self.queue} {self.minute:%Y-%m-%d %H:%M}"
