"""The admin's small pieces of HTML, shared by every page of the app.

Words come from `jobs.presentation`; this module only marks them up, always
through `format_html`, so whatever a job or a runner holds is escaped. Every
instant the admin shows goes through `stamp` (a display method per time
field, `time_field`, where Django would draw "Dec. 7, 2026, 1:38 a.m."): one
format on every page, to the second, with the zone, so a screen lines up
against a runner's log; the attempt record adds milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db import models
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from jobs.presentation import NOTHING, indented_json


def badge(word: str, tone: str) -> SafeString:
    """A coloured label: a job's state, a runner's live or gone."""
    return format_html('<span class="jobs-badge jobs-badge-{}">{}</span>', tone, word)


def stamp(moment: datetime, *, ms: bool = False) -> str:
    """An instant to the second in the site's time zone, named: "2026-12-05 03:32:07 UTC";
    with `ms`, to the millisecond: "2026-12-05 03:32:07.250 UTC".

    A naive time (a site with `USE_TZ = False`) is a wall time in `TIME_ZONE`.
    """
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    local = timezone.localtime(moment)
    fraction = f".{local.microsecond // 1000:03d}" if ms else ""
    return f"{local:%Y-%m-%d %H:%M:%S}{fraction} {local:%Z}"


def stamp_or_nothing(moment: datetime | None, *, ms: bool = False) -> str:
    """`stamp`, or `NOTHING` for a time not set."""
    return NOTHING if moment is None else stamp(moment, ms=ms)


def time_field(model: type[models.Model], name: str) -> Callable[[Any, Any], SafeString]:
    """A display method showing the time field `name` of `model` as `stamp` does,
    under the field's own label, kept on one line. Name it `<name>_shown`."""
    label = str(getattr(model._meta.get_field(name), "verbose_name", name))

    @admin.display(description=label, ordering=name)
    def show(self: Any, row: Any) -> SafeString:
        return format_html(
            '<span class="jobs-stamp">{}</span>', stamp_or_nothing(getattr(row, name))
        )

    show.__name__ = f"{name}_shown"
    return show


#: Where a long name may break: after these, never inside a run of letters and digits.
_SEPARATOR = re.compile(r"([./:_\-@,=+])")


#: A run of letters and digits, which `breakable` never breaks.
_RUN = re.compile(r"[^\W_]+")


def breakable(text: str, longest: int | None = None) -> SafeString:
    """`text`, escaped, that may wrap after a separator (`.`, `/`, `:`, `-`, ...)
    and nowhere else: a kind, a key or a runner's name in a narrow column
    wraps between its parts ("host-10-0-1:" / "4242"), never inside a word
    or a pid, which CSS alone (`overflow-wrap: anywhere`) cannot promise.

    With `longest`, a run of letters and digits longer than that (a digest,
    a run of x's) is cut to its start and "…", so that no one word sets the
    column's width; the caller shows the whole text elsewhere."""
    if longest is not None:
        text = _RUN.sub(lambda run: _cut(run.group(), longest), text)
    return mark_safe(_SEPARATOR.sub(r"\1<wbr>", escape(text)))  # escaped above


def _cut(run: str, longest: int) -> str:
    return run if len(run) <= longest else run[: longest - 1] + "…"


def pretty_json(value: object) -> SafeString:
    """JSON indented for reading, escaped, in a monospace block."""
    return format_html('<pre class="jobs-pre">{}</pre>', indented_json(value))
