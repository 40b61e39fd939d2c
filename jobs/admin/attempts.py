"""A job's attempt record (`jobs.history`) and its holder (`jobs.holding`), marked up
for its admin page.

The history is a table, newest first, each entry's traceback folded in a
`<details>` so that twenty of them still read at a glance; every time is to
the millisecond with its zone, and how long an attempt took is said in ms
under a second. A reclaimed attempt did not run from its start to its
reclaim: its runner was lost, and the table says when it was last heard
from instead. An operator's action (`jobs.history_actions`) is an entry
with who and when, and no attempt. Everything a row holds is escaped.
"""

from __future__ import annotations

from datetime import datetime

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs import presentation
from jobs.admin.display import badge, breakable, stamp, stamp_or_nothing
from jobs.history import Entry, Outcome
from jobs.history_actions import Action, is_action
from jobs.holding import Holders
from jobs.models import Job
from jobs.presentation import NOTHING, attempts_not_done

#: An outcome's badge colour, from the state colours it resembles.
_TONES: dict[str, str] = {
    Outcome.RETRY: "queued",
    Outcome.FAILED: "failed",
    Outcome.TIMED_OUT: "failed",
    Outcome.RECLAIMED: "gone",
    Outcome.CANCELLED: "cancelled",
    Outcome.RELEASED: "waiting",
    Action.RETRIED: "queued",
    Action.RUN_NOW: "queued",
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
                stamp_or_nothing(entry.started_at, ms=True),
                stamp_or_nothing(entry.ended_at, ms=True),
                took(entry),
                breakable(entry.runner) if entry.runner else NOTHING,
                _error(entry),
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
        return breakable(job.claimed_by)
    return format_html("{} {}", breakable(job.claimed_by), badge(stuck, "gone"))


def took(entry: Entry) -> str:
    """How long the attempt ran: in ms under a second ("340 ms"), else as
    `duration` says it; for a reclaimed attempt, that its runner was lost and
    when it was last heard from, since its end is only when it was found."""
    if entry.outcome == Outcome.RECLAIMED:
        if entry.heard_at is None:  # its row was forgotten, or an entry from before
            return "runner lost; last heartbeat not known"
        return f"runner lost; last heartbeat at {stamp(entry.heard_at, ms=True)}"
    return elapsed(entry.started_at, entry.ended_at)


def elapsed(started: datetime | None, ended: datetime | None) -> str:
    """From `started` to `ended`: "340 ms" under a second, "4m 10s" above."""
    if started is None or ended is None:
        return NOTHING
    return presentation.took((ended - started).total_seconds())


def _error(entry: Entry) -> SafeString:
    line = format_html('<span class="jobs-history-error">{}</span>', entry.error or NOTHING)
    if is_action(entry):
        return line
    exception = breakable(entry.exception_class_path)
    if not entry.traceback:
        return format_html('{}<br><code class="jobs-history-class">{}</code>', line, exception)
    return format_html(
        '{}<details><summary><code class="jobs-history-class">{}</code> traceback</summary>'
        '<pre class="jobs-pre jobs-error-block">{}</pre></details>',
        line,
        exception,
        entry.traceback,
    )
