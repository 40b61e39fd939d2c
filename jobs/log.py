"""One structured log line per event: a stable snake_case name plus fields.

The message reads `event key=value ...` for people; the same fields ride in
the record's `extra` for a JSON formatter.
"""

from __future__ import annotations

import logging
from typing import Any

from jobs.presentation import telling_line

logger = logging.getLogger("jobs")


def enabled(level: int) -> bool:
    """Whether an event at `level` would be logged: for hot paths that would
    otherwise build an event's fields for every job only to drop them."""
    return logger.isEnabledFor(level)


def event(name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log event `name` with `fields`, skipping the formatting when nobody listens."""
    if not logger.isEnabledFor(level):
        return
    text = " ".join(f"{key}={_show(value)}" for key, value in fields.items())
    logger.log(level, "%s %s", name, text, extra={"event": name, "fields": fields})


def first_line(error: BaseException) -> str:
    """The telling line of an error for an operator, as written: drivers append
    context lines (the statement, a hint) after the first. An error with no
    text is named by its `repr`."""
    return telling_line(str(error), trim=False) or repr(error)


def _show(value: Any) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text
