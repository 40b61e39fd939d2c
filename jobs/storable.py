"""What every supported database stores: JSON and text it will not refuse.

Each database refuses something the others store. PostgreSQL refuses a NUL
(in `text` and, as `\\u0000`, in `jsonb`) and a lone surrogate; MariaDB's check
on a JSON column (`JSON_VALID`) refuses a lone surrogate and a 32nd level of
nesting; SQLite refuses neither but stops at 1,000 levels; every driver
refuses to encode a lone surrogate into a text column. So a value is checked
here, once, against all of them: what one database accepts, every one does,
and a refusal is a sentence naming what was wrong rather than a database
error (which, in a runner's batch settle, would cost the whole batch).

A spec's payload is checked at enqueue (`jobs.spec`), an attempt's result
before its settle (`jobs.runner.outcomes`); text written to a row by a
settle (a reason, a traceback) is made storable instead (`storable_text`),
since refusing an error message would lose the error.
"""

from __future__ import annotations

import json
from typing import Any

#: `json.dumps(value, allow_nan=False)`, built once: given any argument
#: beyond the value, `json.dumps` builds a new encoder on every call, which
#: was most of the time checking an empty payload took. Strict JSON: NaN and
#: the infinities raise ValueError rather than being written as no JSON
#: parser reads them.
strict_json = json.JSONEncoder(allow_nan=False).encode

#: The deepest nesting of objects and arrays a stored JSON value may have:
#: MariaDB's `JSON_VALID`, the check on its JSON columns, refuses a 32nd level
#: (`[[...]]` 32 deep), and the bound is the same on every database so that a
#: job that queues on one queues on all. A value nested thousands deep is
#: refused with the same sentence, never a RecursionError.
JSON_MAX_DEPTH = 31

#: What `json` writes as an object or an array.
_CONTAINERS = (dict, list, tuple)
#: The types whose values never nest.
_SCALARS = frozenset({str, int, float, bool, type(None)})


class Unstorable(ValueError):
    """A value no supported database would store; the message says why."""


def json_text(value: Any, what: str, max_bytes: int) -> str:
    """`value` as the JSON text a row keeps (escaped to ASCII, as SQLite and
    MySQL store it), checked against every database; raises `Unstorable`
    naming `what` and its fault. `max_bytes` bounds the text."""
    try:
        text = strict_json(value)
    except RecursionError:  # the encoder's own bound, thousands deep: raised, never a crash
        raise Unstorable(_too_deep(what)) from None
    except (TypeError, ValueError) as error:
        raise Unstorable(f"{what} is not JSON-serialisable: {error}") from error
    size = len(text)  # ASCII: one byte a character
    if size > max_bytes:
        raise Unstorable(f"{what} is {size} bytes of JSON; the limit is {max_bytes}")
    # Every object or array writes two brackets, so a short text, or one with
    # few brackets (every usual value), cannot nest deep: the walk is for the
    # others.
    if (
        size > 2 * JSON_MAX_DEPTH
        and text.count("[") + text.count("{") > JSON_MAX_DEPTH
        and deeper_than(value, JSON_MAX_DEPTH)
    ):
        raise Unstorable(_too_deep(what))
    # Both escapes below can also be a backslash written before "u0000" or
    # "ud...": only then is the value itself searched.
    if "\\u0000" in text and _any_text(value, _has_nul):
        raise Unstorable(f"{what} contains a NUL character, which PostgreSQL cannot store")
    if "\\ud" in text and _any_text(value, _has_lone_surrogate):
        # A surrogate is fine in a pair (a character past U+FFFF), refused alone.
        raise Unstorable(
            f"{what} contains a lone surrogate, which is not text PostgreSQL or MariaDB can store"
        )
    return text


def _too_deep(what: str) -> str:
    return (
        f"{what} is nested more than {JSON_MAX_DEPTH} levels deep, "
        "which MariaDB refuses (the bound is the same on every database)"
    )


def storable_text(text: str) -> str:
    """`text` with each NUL and each lone surrogate written as its escape
    (`\\x00`, `\\ud800`), so that every database stores it and a reader still
    sees what was there. `text` itself, at the cost of two scans, when
    there is nothing to replace."""
    if "\x00" not in text and (text.isascii() or not _has_lone_surrogate(text)):
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests objects and arrays (dicts, lists, tuples) more than
    `limit` deep, found level by level without recursion (so also for a value
    that contains itself, or one too deep for Python's own recursion)."""
    if type(value) in _SCALARS:
        return False
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below = []
        for container in level:
            items = container.values() if isinstance(container, dict) else container
            below += [item for item in items if isinstance(item, _CONTAINERS)]
        level = below
    return False


def _any_text(value: Any, test: Any) -> bool:
    """Whether `test` holds for any string in `value`, keys included (called
    only when the JSON text suggests one, so no hot path pays for the walk)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if test(item):
                return True
        elif isinstance(item, dict):
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, (list, tuple)):
            pending += item
    return False


def _has_nul(text: str) -> bool:
    return "\x00" in text


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
