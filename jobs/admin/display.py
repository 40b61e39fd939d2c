"""The admin's small pieces of HTML, shared by the job and runner pages.

Words come from `jobs.presentation`; this module only marks them up, always
through `format_html`, so whatever a job or a runner holds is escaped.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.presentation import indented_json


def badge(word: str, tone: str) -> SafeString:
    """A coloured label: a job's state, a runner's live or gone."""
    return format_html('<span class="jobs-badge jobs-badge-{}">{}</span>', tone, word)


def stamp(moment: datetime) -> str:
    """An instant in the site's time zone, for a tooltip beside a relative time."""
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S %Z}"


def pretty_json(value: object) -> SafeString:
    """JSON indented for reading, escaped, in a monospace block."""
    return format_html('<pre class="jobs-pre">{}</pre>', indented_json(value))
