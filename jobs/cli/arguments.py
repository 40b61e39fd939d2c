"""The `jobs` command's argument types: text to a value, or a sentence refusing it.

Each is an argparse `type`, so a refusal takes argparse's own path: usage and
the sentence on stderr, exit status 2 (`CommandError` under `call_command`),
before anything is read or written. Every number has a range, checked here,
so that a value the database cannot take is refused in words instead of
reaching it ("datatype mismatch" for a `--limit` past 64 bits).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings

from jobs import config, job_ids
from jobs.job_ids import IdPrefix

#: `list --limit`. A listing is read by a person: past ten thousand lines a
#: script wants `stats --json` or the database, and each row listed is loaded
#: whole, payload included (up to 1 MiB).
LIMIT_RANGE = (1, 10_000)

#: `enqueue --max-attempts`: the bounds of the `max_attempts` setting
#: (`jobs.config.BOUNDS`), so that a job queued by hand gets no budget the
#: config row itself would refuse.
MAX_ATTEMPTS_RANGE = config.BOUNDS["max_attempts"]

#: `enqueue --delay`, in seconds: up to ten years (as `retention_days` goes).
#: The column holds dates to the year 9999, but a longer delay typed at a
#: shell is a mistake: milliseconds typed as seconds, or a Unix timestamp
#: (1.7e9, some 56 years) given where a delay was meant.
DELAY_RANGE = (0, 10 * 365 * 86_400)

#: How much of a refused value a refusal repeats: enough to recognise it.
SHOWN = 40


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def job_id(text: str) -> uuid.UUID | IdPrefix:
    """A job id as the admin and `list` show it (a UUID), or its first 8 or more hex digits."""
    try:
        return job_ids.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def payload(text: str) -> dict[str, Any]:
    """A JSON object: a payload names its subject by fields."""
    return _json_object(text, "--payload")


def _json_object(text: str | bytes, source: str) -> dict[str, Any]:
    """`text` decoded as a JSON object, or refused naming `source` (where it was read from)."""
    try:
        value = json.loads(text)
    except ValueError as error:  # UnicodeDecodeError among them: bytes not UTF-8
        raise argparse.ArgumentTypeError(f"{source} is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"{source} must be a JSON object such as '{{\"order\": 42}}', not {_json_type(value)}"
        )
    return value


#: The most `--payload-file` reads, in bytes: 16 times the payload limit
#: (`jobs.spec.PAYLOAD_MAX_BYTES`, of compact JSON), room for any indentation
#: of a payload that fits, while a file given by mistake (a dump, a log, a
#: device) is refused before it is read whole.
PAYLOAD_FILE_MAX_BYTES = 16 * 1024 * 1024


def payload_file(path: str) -> dict[str, Any]:
    """A JSON object read from the file at `path`, or from standard input for "-":
    a payload larger than one shell argument can hold (128 KiB on Linux)."""
    source = "standard input" if path == "-" else repr(path)
    try:
        if path == "-":
            data = sys.stdin.buffer.read(PAYLOAD_FILE_MAX_BYTES + 1)
        else:
            with open(path, "rb") as file:
                data = file.read(PAYLOAD_FILE_MAX_BYTES + 1)
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f"cannot read {source}: {error.strerror or error}"
        ) from None
    if len(data) > PAYLOAD_FILE_MAX_BYTES:
        raise argparse.ArgumentTypeError(
            f"{source} is over {PAYLOAD_FILE_MAX_BYTES:,} bytes, far past the "
            "1 MiB a payload may hold"
        )
    return _json_object(data, source)


def _json_type(value: object) -> str:
    """What JSON calls the type of a decoded value: "an array", "a number", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"


def whole_number(bounds: tuple[int, int], why: str = "") -> Callable[[str], int]:
    """An argument type for a whole number within `bounds` (inclusive); `why` explains them.

    The refusal does not name the option: argparse puts "argument --limit:" before it.
    """
    low, high = bounds

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {low:,} to {high:,}{why}, not {_shown(text)!r}"
            )
        return value

    return parse


limit = whole_number(LIMIT_RANGE)
max_attempts = whole_number(MAX_ATTEMPTS_RANGE, " (the bounds of the max_attempts setting)")


def delay(text: str) -> timedelta:
    """A delay in seconds, fractions allowed, within `DELAY_RANGE`."""
    low, high = DELAY_RANGE
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not low <= seconds <= high:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from {low} to {high:,} (ten years), not {_shown(text)!r}"
        )
    return timedelta(seconds=seconds)


def database_alias(text: str) -> str:
    """A database alias from `settings.DATABASES`."""
    known = list(settings.DATABASES)
    if text not in known:
        raise argparse.ArgumentTypeError(
            f"no database {text!r} in settings.DATABASES (known: {', '.join(known)})"
        )
    return text


def queue_name(text: str) -> str:
    """A queue's name, as a job's queue column takes it."""
    from jobs.spec import queue_name_problem

    if problem := queue_name_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def kind(text: str) -> str:
    """A kind, as a job's kind column takes it (`jobs.spec.kind_problem`)."""
    from jobs.spec import kind_problem

    if problem := kind_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def priority(text: str) -> int:
    """A job's priority: a whole number within the spec's range, higher first."""
    from jobs.spec import PRIORITY_MAX, PRIORITY_MIN

    return whole_number((PRIORITY_MIN, PRIORITY_MAX), " (higher runs first)")(text)


def concurrency_limit(text: str) -> int:
    """A kind's concurrency limit: a whole number from 0 (hold its jobs) up."""
    from jobs.spec import CONCURRENCY_LIMIT_MAX

    return whole_number((0, CONCURRENCY_LIMIT_MAX), " (0 holds every job of the kind)")(text)
