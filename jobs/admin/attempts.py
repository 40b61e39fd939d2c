"""A job's attempt record (`jobs.history`) and its holder (`jobs.holding`), marked up
for its admin page.

The history is a table, newest first, each entry's traceback folded in a
`<details>` so that twenty of them still read at a glance; every time is to
the second with its zone. Everything a row holds is escaped (`format_html`).
"""

from __future__ import annotations

from datetime import datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.admin.display import badge, stamp_or_nothing
from jobs.history import Outcome
from jobs.holding import Holders
from jobs.models import Job
from jobs.presentation import NOTHING, attempts_not_done, duration

#: An outcome's badge colour, from the state colours it resembles.
_TONES: dict[str, str] = {
    Outcome.RETRY: "queued",
    Outcome.FAILED: "failed",
    Outcome.TIMED_OUT: "failed",
    Outcome.RECLAIMED: "gone",
    Outcome.CANCELLED: "cancelled",
    Outcome.RELEASED: "waiting",
}


def history_table(job: Job) -> SafeString | str:
    """Each attempt that did not end done, newest first, with the count of all."""
    entries = job.attempt_history
    if not entries:
        return NOTHING
    rows = format_html_join(
        "\n",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>",
        (
            (
                entry.number,
                NOTHING if entry.attempt is None else entry.attempt,
                badge(entry.outcome.replace("_", " "), _TONES.get(entry.outcome, "cancelled")),
                stamp_or_nothing(entry.started_at),
                stamp_or_nothing(entry.ended_at),
                _took(entry.started_at, entry.ended_at),
                entry.runner or NOTHING,
                _error(entry.error, entry.exception_class_path, entry.traceback),
            )
            for entry in reversed(entries)
        ),
    )
    caption = attempts_not_done(job.error_count, len(entries))
    return format_html(
        '<table class="jobs-history"><caption>{}</caption><thead><tr>'
        '<th scope="col">#</th><th scope="col">attempt</th><th scope="col">outcome</th>'
        '<th scope="col">started</th><th scope="col">ended</th><th scope="col">took</th>'
        '<th scope="col">runner</th>'
        '<th scope="col">error</th></tr></thead><tbody>{}</tbody></table>',
        caption,
        rows,
    )


def holder(job: Job, holders: Holders) -> SafeString | str:
    """The runner that claimed the job, and "runner gone" when it holds a
    running job but has stopped reporting in."""
    if not job.claimed_by:
        return NOTHING
    stuck = holders.stuck(job)
    if not stuck:
        return job.claimed_by
    return format_html("{} {}", job.claimed_by, badge(stuck, "gone"))


def _took(started: datetime | None, ended: datetime | None) -> str:
    if started is None or ended is None:
        return NOTHING
    return duration((ended - started).total_seconds())


def _error(error: str, exception: str, traceback: str) -> SafeString:
    line = format_html('<span class="jobs-history-error">{}</span>', error or NOTHING)
    if not traceback:
        return format_html('{}<br><code class="jobs-history-class">{}</code>', line, exception)
    return format_html(
        '{}<details><summary><code class="jobs-history-class">{}</code> traceback</summary>'
        '<pre class="jobs-pre jobs-error-block">{}</pre></details>',
        line,
        exception,
        traceback,
    )
