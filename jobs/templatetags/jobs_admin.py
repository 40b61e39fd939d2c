"""The admin templates' `stamp` filter: an instant as every admin page shows
it (`jobs.admin.display.stamp`), so a template does not write a format of
its own beside the one the display methods use."""

from __future__ import annotations

from datetime import datetime

from django import template

from jobs.admin.display import stamp_or_nothing

register = template.Library()


@register.filter(name="stamp")
def stamp(moment: datetime | None) -> str:
    """`{{ when|stamp }}`: "2026-12-07 01:38:54 UTC", or a dash for no time."""
    return stamp_or_nothing(moment)
