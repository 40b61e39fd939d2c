"""A workflow's steps in the order they can run: every dependency before the
steps that wait for it. What an operator reads a workflow in (`describe`), and,
backwards, what a cancel retires it in (dependents first).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from datetime import datetime


def run_order(
    nodes: Sequence[tuple[int, datetime, str]],
    edges: Iterable[tuple[int, int]],
) -> list[int]:
    """The positions in `nodes` (id, created_at, name) in an order with each
    (step, dependency) edge's dependency before its step, ties by created_at
    then name (Kahn's, on a heap). Edges to a node not there are ignored; a
    cycle, which `add` cannot write, would leave its steps last, in tie order.

    Ids are the `UUID.int` of the steps' jobs: a `UUID` is hashed in Python,
    and a workflow of 10,000 steps looks up tens of thousands of them."""
    index = {job_id: n for n, (job_id, _, _) in enumerate(nodes)}
    keys = [(created, name, n) for n, (_, created, name) in enumerate(nodes)]
    blocking = [0] * len(nodes)
    dependents: list[list[int]] = [[] for _ in nodes]
    for step_id, dep_id in edges:
        step, dep = index.get(step_id), index.get(dep_id)
        if step is not None and dep is not None and step != dep:
            blocking[step] += 1
            dependents[dep].append(step)
    ready = [keys[n] for n, count in enumerate(blocking) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        n = heapq.heappop(ready)[2]
        order.append(n)
        for step in dependents[n]:
            blocking[step] -= 1
            if blocking[step] == 0:
                heapq.heappush(ready, keys[step])
    if len(order) < len(nodes):
        placed = set(order)
        order += sorted((n for n in range(len(nodes)) if n not in placed), key=keys.__getitem__)
    return order
