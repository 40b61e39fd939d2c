"""The runner's pass as one message: the settings it is planned under, then the
statement, prepared by name or written out with its values.

A setting made for a transaction only (`set_config(..., true)`) must reach
the server before the statement it is for is planned, and with it, in one
round trip: a statement of its own each pass would double the pass's round
trips. Sent as one simple-protocol message (`SELECT set_config(...);
EXECUTE name(values)`), the two run in one implicit transaction, the second
planned after the first has run, and the settings end with it. The values
are written into the text as literals, here: the extended protocol binds
them server-side, but takes one statement per round trip unless it is
pipelined, and psycopg's pipeline cost a claim far more Python than writing
the literals (README, "Costs behind the hot path"). The values are few
and plain (the store writes its arrays as literals already:
`driver.array_literal`).

A prepared statement (the settings' own, and the pass's) is made by
`PREPARE name AS ...` in the message that first executes it, under a name
of its connection's own (`preparing.Names.planned_name`), and executed by
name after: `EXECUTE settings; EXECUTE pass(values)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg
from django.db import DataError

from jobs.store.postgresql import preparing
from jobs.store.postgresql.sql import PLANNER_SETTINGS_SQL

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


class _Template:
    """A statement with named placeholders, as each message writes it."""

    def __init__(self, sql: str) -> None:
        #: The placeholders' names in order of first use: $1, $2...
        self.names = list(dict.fromkeys(_PLACEHOLDER.findall(sql)))
        numbered = _PLACEHOLDER.sub(lambda found: f"${self.names.index(found[1]) + 1}", sql)
        #: The text PREPARE takes.
        self.numbered = numbered.strip()
        #: The text around each placeholder, and each placeholder's name in turn.
        pieces = _PLACEHOLDER.split(sql.strip())
        self.chunks, self.slots = pieces[0::2], pieces[1::2]


_templates: dict[str, _Template] = {}


def message(
    raw: psycopg.Connection[Any], sql: str, params: Mapping[str, Any], prepare: bool
) -> tuple[str, list[tuple[str, str]]]:
    """The message that runs `sql` with `params` under the runner's planner
    settings on `raw`, and the statements it prepares, text and name (to
    tell `prepared` once it ran). The statement's rows are its last result.

    Prepared, the settings are a statement of their own too: the server then
    plans neither, and parses `EXECUTE name` and the values."""
    template = _templates.get(sql)
    if template is None:
        template = _templates[sql] = _Template(sql)
    quote = _quote_for(raw)
    if not prepare:
        chunks, written = template.chunks, list[str]()
        for n, name in enumerate(template.slots):
            written += (chunks[n], quote(params[name]))
        written.append(chunks[-1])
        return _checked(f"{PLANNER_SETTINGS_SQL}; {''.join(written)}"), []
    values = ", ".join([quote(params[name]) for name in template.names])
    names = preparing.names(raw)
    settings_as = names.planned.get(PLANNER_SETTINGS_SQL)
    statement_as = names.planned.get(sql)
    if settings_as is not None and statement_as is not None:
        return _checked(f"EXECUTE {settings_as}; EXECUTE {statement_as}({values})"), []
    preparing_now, parts = [], []
    if settings_as is None:
        settings_as = names.planned_name()
        preparing_now.append((PLANNER_SETTINGS_SQL, settings_as))
        parts.append(f"PREPARE {settings_as} AS {PLANNER_SETTINGS_SQL}")
    if statement_as is None:
        statement_as = names.planned_name()
        preparing_now.append((sql, statement_as))
        parts.append(f"PREPARE {statement_as} AS {template.numbered}")
    parts += (f"EXECUTE {settings_as}", f"EXECUTE {statement_as}({values})")
    return _checked("; ".join(parts)), preparing_now


def prepared(raw: psycopg.Connection[Any], statements: list[tuple[str, str]]) -> None:
    """`statements` (text, name) are prepared on `raw`: the message that
    prepared them ran. (One that failed may have left some behind: new
    names are used next time, never those.)"""
    planned = preparing.names(raw).planned
    for sql, name in statements:
        planned[sql] = name


def _checked(text: str) -> str:
    """A message's text can hold no NUL: the server reads it up to the first."""
    if "\x00" in text:
        raise DataError("a value of the runner's statement contains a NUL character")
    return text


def _quote_for(raw: psycopg.Connection[Any]) -> Any:
    """How to write a value as a literal for `raw`'s server: within quotes, a
    backslash is itself unless `standard_conforming_strings` is off (never,
    since PostgreSQL 9.1, unless set so), where it escapes."""
    if raw.pgconn.parameter_status(b"standard_conforming_strings") == b"on":
        return literal
    return _escaped_literal


def literal(value: Any) -> str:
    """`value` as a SQL literal: text quoted, numbers and dates as the server
    reads them, None as NULL. Only the types the store's statements take."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return "'" + value.isoformat() + "'"
    raise TypeError(f"no literal for {type(value).__name__} in the runner's statements")


def _escaped_literal(value: Any) -> str:
    if isinstance(value, str):
        return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    return literal(value)
