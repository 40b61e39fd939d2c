"""The per-minute counts' two statements (`jobs.metrics.minutes`): add a
process's counts to its rows, and delete the rows of old minutes.

Written by hand, not through the ORM: the heartbeat adds to a row that may
or may not exist yet, which the ORM says in an UPDATE, then an INSERT when
it matched nothing, in a transaction, each statement compiled afresh; one
upsert per save costs a fraction of that, and the save runs on every
heartbeat of every runner. The upsert is each vendor's own (`ON CONFLICT`
on PostgreSQL and SQLite, `ON DUPLICATE KEY` on MySQL and MariaDB), on the
(minute, queue, runner) unique constraint.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections

from jobs.models import MinuteCount
from jobs.models.minutes import WAIT_COLUMNS

#: The counted columns, in the order each row's counts come.
COUNTS = ("started", "done", "failed", *WAIT_COLUMNS)

_INSERT = "INSERT INTO jobs_minutecount (minute, queue, runner, {columns}) VALUES {rows}".format(
    columns=", ".join(COUNTS), rows="{rows}"
)
#: Per vendor: what a row already there gets: its counts plus the new ones.
_ADD = {
    "postgresql": " ON CONFLICT (minute, queue, runner) DO UPDATE SET "
    + ", ".join(f"{c} = jobs_minutecount.{c} + excluded.{c}" for c in COUNTS),
    "sqlite": " ON CONFLICT (minute, queue, runner) DO UPDATE SET "
    + ", ".join(f"{c} = jobs_minutecount.{c} + excluded.{c}" for c in COUNTS),
    "mysql": " ON DUPLICATE KEY UPDATE " + ", ".join(f"{c} = {c} + VALUES({c})" for c in COUNTS),
}
#: Delete the rows of minutes before %s.
PRUNE_SQL = "DELETE FROM jobs_minutecount WHERE minute < %s"


def add(using: str, runner: str, rows: Sequence[tuple[datetime, str, Sequence[int]]]) -> None:
    """Add each (minute, queue, counts in `COUNTS` order) of `rows` to
    `runner`'s row of that minute and queue, creating it: one statement."""
    if not rows:
        return
    connection = connections[using]
    minute = MinuteCount._meta.get_field("minute")
    values: list[Any] = []
    for at, queue, counts in rows:
        values += [minute.get_db_prep_save(at, connection), queue, runner, *counts]
    placeholders = "(" + ", ".join(["%s"] * (3 + len(COUNTS))) + ")"
    statement = _INSERT.format(rows=", ".join([placeholders] * len(rows)))
    with connection.cursor() as cursor:
        cursor.execute(statement + _ADD[connection.vendor], values)


def prune(using: str, before: datetime) -> int:
    """Delete the rows of minutes before `before`; how many went."""
    connection = connections[using]
    minute = MinuteCount._meta.get_field("minute")
    with connection.cursor() as cursor:
        cursor.execute(PRUNE_SQL, [minute.get_db_prep_save(before, connection)])
        return max(int(cursor.rowcount), 0)
