"""One structured log line per event: a stable snake_case name plus fields.

The message reads `event key=value ...` for people; the same fields ride in
the record's `extra` for a JSON formatter. Where the lines go is the project's
`LOGGING` to decide; `runjobs` prints them itself only when nothing would
(`to_terminal_unless_configured`), and `JSONFormatter` writes them one JSON
object a line for a project that ships its logs to a collector.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from jobs.presentation import telling_line, terminal_safe

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
    """A field's value as `key=value` shows it: as it is when it holds no space,
    quote, `=` or character a terminal would obey; else quoted, its quotes and
    backslashes escaped, and every such character written as its escape
    (`jobs.presentation.terminal_safe`, as `manage.py jobs` shows it): a key
    holding an ESC or a newline must neither drive the operator's terminal
    nor start a line that reads as another event."""
    text = value if type(value) is str else str(value)
    if text.isprintable() and text and " " not in text and '"' not in text and "=" not in text:
        return text
    return '"' + terminal_safe(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


class JSONFormatter(logging.Formatter):
    """One JSON object a line: `time`, `level`, `logger`, `event`, the event's
    fields as top-level keys, `message`, and `exception` when there is one.

    For a collector (Loki, Elasticsearch, CloudWatch) that indexes keys rather
    than parsing `key=value` text. Give a handler of the `jobs` logger
    `{"()": "jobs.log.JSONFormatter"}` in `LOGGING`; records of other loggers,
    which carry no `event` or `fields`, come out with `event` null and their
    message. `time` is UTC with milliseconds, from when the record was made.

    A field never replaces a key the line sets itself: one named `message` is
    written as `field_message`. A value JSON has no type for is written as a
    datetime's ISO 8601, a timedelta's seconds, an exception's repr, or else
    its `str` (a UUID), so a line is always written, whatever a field holds.

    Written with the stdlib `json`, not python-json-logger: a dependency for
    a few lines. A project that already formats with python-json-logger (or
    anything else) can read the same two extras `event` puts on every record
    of the `jobs` logger: `record.event`, the name, and `record.fields`.
    """

    #: The keys the formatter writes itself, which no field may overwrite.
    RESERVED = frozenset({"time", "level", "logger", "event", "message", "exception", "stack"})

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "event": _safe(getattr(record, "event", None)),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            for name, value in fields.items():
                key = str(name)
                while key in self.RESERVED or key in line:
                    key = "field_" + key
                line[key] = _safe(value)
        elif fields is not None:  # another library's `fields` extra, whatever it is
            line["fields"] = _safe(fields)
        line["message"] = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line)


def _utc(created: float) -> str:
    """A record's `created` as ISO 8601 in UTC, to the millisecond: `...T12:00:00.123Z`."""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _safe(value: Any) -> Any:
    """`value` as something `json.dumps` writes as it is."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, BaseException):
        return repr(value)
    isoformat = getattr(value, "isoformat", None)  # a datetime, a date, a time
    if callable(isoformat):
        return isoformat()
    return str(value)  # a UUID, a Path, a list: as `key=value` text shows it
