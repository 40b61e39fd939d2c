"""Which rows a MySQL or MariaDB claim reads, before it locks them: the
candidates in claim order (`select_ready`), and the next chunk of them whose
kinds have room (`_chunk`). Kept apart from the store's verbs for size; the
statements are in `.sql`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.store.mysql import sql
from jobs.store.rows import placeholders, queue_filter, queue_params


def select_ready(
    cursor: Any,
    at: Any,
    kinds: Sequence[str],
    wanted: int,
    queues: Sequence[str] | None = None,
    paused_queues: Sequence[str] = (),
) -> list[Any]:
    """The ids and kinds of the first `wanted` rows of `kinds` (in `queues`,
    when given) ready at `at` (a prepared datetime), in claim order: nothing
    is locked.

    One statement per priority that queued rows hold, highest first, until
    `wanted` are found or no priority is left.
    """
    scope = [*kinds, *queue_params(queues, paused_queues)]
    formats = {
        "kinds": placeholders(len(kinds)),
        "queues": queue_filter("`queue`", queues, paused_queues),
    }
    found: list[tuple[Any, ...]] = []
    level: Any = sql.ABOVE_ALL
    # Rows found that come before any row of a priority not read yet: every
    # queued row found, and the expired running rows above that priority.
    ahead = 0
    while level is not None and ahead < wanted:
        first = level == sql.ABOVE_ALL
        cursor.execute(
            sql.SELECT_READY_SQL.format(
                running=sql.EXPIRED_SQL.format(**formats) if first else "", **formats
            ),
            [
                level,
                at,
                *scope,
                wanted - ahead,
                *([at, at, *scope, wanted] if first else []),
                level,
            ],
        )
        rows = cursor.fetchall()
        level = rows[-1][1]
        found += rows[:-1]
        ahead = len(found) if level is None else sum(1 for row in found if row[1] > level)
    # A zero date written by hand reads as None: first, as in `in_claim_order`.
    found.sort(
        key=lambda row: (-row[1], row[2] is not None, row[2] or 0, row[3] is not None, row[3] or 0)
    )
    return [(row[0], row[4]) for row in found]


def _chunk(
    candidates: list[tuple[Any, str]], wanted: int, rooms: dict[str, int]
) -> tuple[list[tuple[Any, str]], list[tuple[Any, str]]]:
    """The next `wanted` candidates whose kinds have room (each taking its
    room as it is chosen), and the candidates after them."""
    chunk: list[tuple[Any, str]] = []
    for position, (job_id, kind) in enumerate(candidates):
        if len(chunk) == wanted:
            return chunk, candidates[position:]
        if kind in rooms:
            if rooms[kind] <= 0:
                continue
            rooms[kind] -= 1
        chunk.append((job_id, kind))
    return chunk, []
