"""One structured log line per event: a stable snake_case name plus fields.

The message reads `event key=value ...` for people; the same fields ride in
the record's `extra` for a JSON formatter. Where the lines go is the project's
`LOGGING` to decide; `runjobs` prints them itself only when nothing would
(`to_terminal_unless_configured`).
"""

from __future__ import annotations

import logging
from typing import Any, TextIO

from jobs.presentation import telling_line

logger = logging.getLogger("jobs")


#: The terminal's line when the project configured none: the time, then the event.
TERMINAL_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def to_terminal_unless_configured(
    stream: TextIO | None = None, target: logging.Logger = logger
) -> bool:
    """Print `target`'s lines (the `jobs` logger's) to `stream`, stderr by default,
    when no handler would receive them; whether it did.

    Python's default is to drop INFO and print warnings bare, so a newcomer
    without a `LOGGING` setting would watch `runjobs` run jobs in silence. A
    project that gave `jobs`, or any logger above it, a handler has chosen
    where the lines go, and is left alone; a level it set is kept, else INFO.
    """
    if target.hasHandlers():
        return False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(TERMINAL_FORMAT))
    target.addHandler(handler)
    if target.level == logging.NOTSET:
        target.setLevel(logging.INFO)
    return True


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
