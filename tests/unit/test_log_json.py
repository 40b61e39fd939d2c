"""The `jobs` logger's lines as JSON for a collector, and every event name in the README.

A collector indexes keys, so a line must be one JSON object whatever a field
holds, and a field must never overwrite the keys every line carries. The event
names are the log's interface: a dashboard or an alert is written against
them, so each one the code emits is listed, with its fields, in the README.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import logging.config
import math
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs import log

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jobs"
README = ROOT / "README.md"

#: Functions that log an event named by their first argument, passed on to
#: `log.event` as a variable: their callers' literals are the event names.
FORWARDERS = {"logged"}  # jobs.controls.logged: a control's change, from the admin and the CLI


def formatted(**record: Any) -> dict[str, Any]:
    """The JSON object the formatter writes for a record made of `record`."""
    line = log.JSONFormatter().format(logging.makeLogRecord(record))
    assert "\n" not in line, f"one record is one line: {line!r}"
    found = json.loads(line)
    assert isinstance(found, dict), "a line is one JSON object"
    return found


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The `jobs` logger's lines at INFO and above, JSON-formatted, in a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(log.JSONFormatter())
    level = log.logger.level
    log.logger.addHandler(handler)
    log.logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        log.logger.removeHandler(handler)
        log.logger.setLevel(level)


def test_a_jobs_event_formats_as_one_json_object_with_its_fields_at_the_top_level(json_lines):
    """A collector indexes top-level keys: fields nested or left in the text are unsearchable."""
    job_id = uuid.uuid4()
    log.event("job_retry", outcome="retry", job_id=job_id, kind="orders.ship", attempt=2)

    lines = json_lines.getvalue().splitlines()
    assert len(lines) == 1, f"one event is one line: {lines}"
    found = json.loads(lines[0])
    assert list(found) == [
        "time",
        "level",
        "logger",
        "event",
        "outcome",
        "job_id",
        "kind",
        "attempt",
        "message",
    ], "the line's keys, then the event's fields in the order it gave them, then the message"
    assert (found["level"], found["logger"], found["event"]) == ("INFO", "jobs", "job_retry")
    assert (found["outcome"], found["job_id"], found["kind"], found["attempt"]) == (
        "retry",
        str(job_id),
        "orders.ship",
        2,
    ), "each field is a key of its own, a number kept a number"
    assert found["message"] == (
        f"job_retry outcome=retry job_id={job_id} kind=orders.ship attempt=2"
    ), "the message is the same `event key=value` line people read"


def test_time_is_utc_iso_8601_to_the_millisecond_whatever_the_local_zone(monkeypatch):
    """Lines from machines in different zones must sort and join on one clock."""
    monkeypatch.setenv("TZ", "America/St_Johns")  # UTC-3:30 or -2:30: no zone to mistake
    time.tzset()
    try:
        found = formatted(msg="m", created=1_700_000_000.1239)
    finally:
        monkeypatch.undo()
        time.tzset()

    assert found["time"] == "2023-11-14T22:13:20.123Z", "UTC, milliseconds, from record.created"


def test_a_field_named_like_a_key_of_the_line_is_kept_beside_it_not_over_it():
    """A field called `message` must neither be lost nor replace the line's message."""
    fields = {"time": "t", "level": "l", "logger": "g", "event": "e", "message": "m"}
    found = formatted(name="jobs", msg="job_x", levelname="INFO", event="job_x", fields=fields)

    assert (found["level"], found["logger"], found["event"], found["message"]) == (
        "INFO",
        "jobs",
        "job_x",
        "job_x",
    ), "the line's own keys say what the record says"
    assert found["time"].endswith("Z"), "the line's own time, not the field's"
    assert {key: found[f"field_{key}"] for key in fields} == fields, (
        "each colliding field is kept, under its name prefixed `field_`"
    )


def test_a_field_json_has_no_type_for_is_written_as_text_and_the_line_still_written():
    """A field holding a datetime or an error must not cost the whole line."""
    job_id, moment = uuid.uuid4(), datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    fields = {
        "job_id": job_id,
        "run_at": moment,
        "budget": timedelta(minutes=5),
        "error": ValueError("boom"),
        "path": Path("/tmp/bell"),
        "ratio": math.nan,
        "enabled": True,
        "nothing": None,
    }
    found = formatted(msg="job_x", event="job_x", fields=fields)

    assert found["job_id"] == str(job_id), "a UUID as its text"
    assert found["run_at"] == "2025-03-01T12:30:00+00:00", "a datetime in ISO 8601"
    assert found["budget"] == 300.0, "a timedelta as its seconds"
    assert found["error"] == "ValueError('boom')", "an exception as its repr"
    assert found["path"] == "/tmp/bell", "anything else as its str"
    assert found["ratio"] == "nan", "NaN is no JSON: written as text, the line stays strict JSON"
    assert (found["enabled"], found["nothing"]) == (True, None), "JSON's own types are kept"


def test_an_exception_is_written_as_its_traceback_in_the_same_line(json_lines):
    """A traceback split over lines would reach the collector as lines of no event."""
    try:
        raise ValueError("boom")
    except ValueError:
        log.logger.exception("job_x_failed")

    lines = json_lines.getvalue().splitlines()
    assert len(lines) == 1, f"the traceback stays inside the one line: {lines}"
    found = json.loads(lines[0])
    assert found["exception"].startswith("Traceback (most recent call last):"), found
    assert found["exception"].endswith("ValueError: boom"), "the traceback, to the error"
    assert (found["level"], found["message"]) == ("ERROR", "job_x_failed")


def test_a_record_of_another_logger_without_event_or_fields_formats_too():
    """One handler may serve the project's loggers and Django's as well as `jobs`."""
    found = formatted(
        name="django.request", levelname="WARNING", msg="Not Found: %s", args=("/nope",)
    )

    assert found == {
        "time": found["time"],
        "level": "WARNING",
        "logger": "django.request",
        "event": None,
        "message": "Not Found: /nope",
    }, "the line's keys, `event` null, the message with its arguments merged"


def test_a_logging_setting_naming_the_formatter_writes_the_jobs_events_as_json():
    """The README's `LOGGING` example, as `dictConfig` (and so Django) reads it."""
    stream = io.StringIO()
    saved = (log.logger.handlers[:], log.logger.level, log.logger.propagate)
    try:
        logging.config.dictConfig(
            {
                "version": 1,
                "disable_existing_loggers": False,
                "formatters": {"json": {"()": "jobs.log.JSONFormatter"}},
                "handlers": {
                    "collector": {
                        "class": "logging.StreamHandler",
                        "formatter": "json",
                        "stream": stream,
                    }
                },
                "loggers": {"jobs": {"handlers": ["collector"], "level": "INFO"}},
            }
        )
        log.event("runner_stopped", passes=3)
    finally:
        for handler in log.logger.handlers:
            handler.close()
        log.logger.handlers[:], log.logger.level, log.logger.propagate = saved

    found = json.loads(stream.getvalue())
    assert (found["event"], found["passes"]) == ("runner_stopped", 3), found


# -- every event in the README ----------------------------------------------------


def _literals(node: ast.expr) -> list[str]:
    """The event names an argument can be: a string, or either string of a
    conditional (`"job_reclaimed" if ... else "job_claimed"`); [] otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        found = [*_literals(node.body), *_literals(node.orelse)]
        return found if len(found) == 2 else []
    return []


def emitted() -> tuple[set[str], list[str]]:
    """Every event name the package logs, read from the source: the first
    argument of each `log.event(...)` and of each call to a forwarder; and
    where a `log.event` is given a name no literal says, outside a forwarder."""
    names: set[str] = set()
    unread: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        inside: dict[ast.AST, str] = {}
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                inside.update(dict.fromkeys(ast.walk(function), function.name))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            is_event = called == "event" and ast.unparse(func) == "log.event"
            if not (is_event or called in FORWARDERS):
                continue
            found = _literals(node.args[0])
            names.update(found)
            if is_event and not found and inside.get(node) not in FORWARDERS:
                unread.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return names, unread


def readme_section() -> str:
    """The README's "Log events" section, up to the next heading of its rank or
    above (a `# comment` in a code block is no heading)."""
    lines = README.read_text().splitlines()
    assert "### Log events" in lines, "the README has a `### Log events` section"
    section, fenced = [], False
    for line in lines[lines.index("### Log events") + 1 :]:
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"#{1,3} ", line):
            break
        section.append(line)
    return "\n".join(section)


def test_every_event_name_is_a_literal_the_source_can_be_read_for():
    """An event named at run time would escape the README check below."""
    names, unread = emitted()
    assert unread == [], f"log.event with a name no literal says (add a forwarder?): {unread}"
    assert {"runner_started", "job_retry", "job_claimed", "job_reclaimed"} <= names, (
        "the scan finds plain names and both sides of a conditional one"
    )
    assert {"jobs_control_changed", "jobs_control_removed"} <= names, "and a forwarder's"


def test_every_event_the_package_logs_is_listed_in_the_readme():
    """The event names are the interface dashboards and alerts are written against."""
    section = readme_section()
    missing = sorted(name for name in emitted()[0] if f"`{name}`" not in section)
    assert missing == [], f"events the README's Log events section does not list: {missing}"


def test_the_readme_lists_no_event_the_package_does_not_log():
    """An event listed but never logged is an alert that can never fire."""
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", readme_section(), flags=re.MULTILINE))
    assert listed, "the section's table names its events in its first column"
    invented = sorted(listed - emitted()[0])
    assert invented == [], f"the README lists events nothing logs: {invented}"
