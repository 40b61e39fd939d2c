"""A workflow's steps in the order they can run: every dependency before the
steps that wait for it. What an operator reads a workflow in (`describe`), and,
backwards, what a cancel retires it in (dependents first).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime


def run_order(
    nodes: Iterable[tuple[uuid.UUID, datetime, str]],
    edges: Sequence[tuple[uuid.UUID, uuid.UUID]],
) -> list[uuid.UUID]:
    """`nodes` (id, created_at, name) with each (step, dependency) edge's
    dependency before its step, ties by created_at then name (Kahn's, on a
    heap). Edges to a job no longer there are ignored; a cycle, which `add`
    cannot write, would leave its steps last, in tie order."""
    keys = {job_id: (created, name, str(job_id)) for job_id, created, name in nodes}
    blocking: dict[uuid.UUID, int] = dict.fromkeys(keys, 0)
    dependents: dict[uuid.UUID, list[uuid.UUID]] = {}
    for step, dep in edges:
        if step in keys and dep in keys and step != dep:
            blocking[step] += 1
            dependents.setdefault(dep, []).append(step)
    ready = [(keys[i], i) for i, n in blocking.items() if n == 0]
    heapq.heapify(ready)
    order: list[uuid.UUID] = []
    while ready:
        _, job_id = heapq.heappop(ready)
        order.append(job_id)
        for step in dependents.get(job_id, ()):
            blocking[step] -= 1
            if blocking[step] == 0:
                heapq.heappush(ready, (keys[step], step))
    if len(order) < len(keys):
        placed = set(order)
        order += sorted((i for i in keys if i not in placed), key=lambda i: keys[i])
    return order
