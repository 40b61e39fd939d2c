"""The admin's small pieces of HTML, shared by the job and runner pages.

Words come from `jobs.presentation`; this module only marks them up, always
through `format_html`, so whatever a job or a runner holds is escaped.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.presentation import NOTHING, indented_json


def badge(word: str, tone: str) -> SafeString:
    """A coloured label: a job's state, a runner's live or gone."""
    return format_html('<span class="jobs-badge jobs-badge-{}">{}</span>', tone, word)


def stamp(moment: datetime) -> str:
    """An instant to the second in the site's time zone, named: "2026-12-05 03:32:07 UTC".

    A naive time (a site with `USE_TZ = False`) is a wall time in `TIME_ZONE`.
    """
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z}"


def stamp_or_nothing(moment: datetime | None) -> str:
    """`stamp`, or `NOTHING` for a time not set."""
    return NOTHING if moment is None else stamp(moment)


def pretty_json(value: object) -> SafeString:
    """JSON indented for reading, escaped, in a monospace block."""
    return format_html('<pre class="jobs-pre">{}</pre>', indented_json(value))
