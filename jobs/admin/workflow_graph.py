"""A workflow's graph as SVG geometry: steps and edges in, boxes and paths out.

The admin's workflow page (`jobs.admin.workflow_page`) draws it inline, as the
dashboard draws its charts (`jobs.admin.charts`): no script, no asset from
outside the package, so it works offline and under a strict CSP. Nothing here
is HTML; the template draws the shapes and escapes every name.

The layout is the classic layered one, kept small: each step's layer is the
longest path to it from a step with no dependency, so every dependency sits in
an earlier layer; within a layer, a few barycentre sweeps order the steps to
cut crossings, keeping the order that crossed least. Layers run left to right
when the graph is wider than it is deep (a fan-out), top to bottom when it is
deeper (a chain), so that a graph's long side goes down the page, which
scrolls, and its text is never scaled down much to fit. Arrows are routed
between the boxes (`jobs.admin.workflow_edges`).

Above `MAX_BOXES` steps (or `MAX_EDGES` edges) a box per step would be
unreadable and slow, so the picture is a summary instead: a bar per layer (or
per band of layers, at most `MAX_BANDS`), its length the steps in it, split by
state. Layering is linear in steps and edges, so even that is cheap at 10,000.
"""

from __future__ import annotations

import bisect
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jobs.admin.workflow_edges import Router

#: Above these a box per step is not drawn, but a summary by layer.
MAX_BOXES, MAX_EDGES = 250, 2_000
#: The most bars a summary draws; more layers are grouped into bands.
MAX_BANDS = 60
#: Barycentre sweeps (alternately down and up the layers).
SWEEPS = 8

#: The geometry, in SVG user units (drawn one to one with CSS pixels).
MARGIN = 8
BOX_WIDTH, BOX_HEIGHT = 150, 30
#: The space between boxes of one layer, and between layers, in each direction.
ACROSS_GAP_RIGHT, ALONG_GAP_RIGHT = 10, 36
ACROSS_GAP_DOWN, ALONG_GAP_DOWN = 16, 40
#: The longest name a box shows whole at 12 px; longer ones end in "…".
LABEL_CHARS = 20
#: A summary's columns: the layer's label, its bar, its count.
BAND_LABEL, BAND_BAR, BAND_COUNT, BAND_HEIGHT, BAND_GAP = 130, 600, 90, 20, 8

RIGHT, DOWN = "right", "down"


@dataclass(frozen=True)
class Node:
    """A step as the picture needs it: what to show and where it links."""

    id: uuid.UUID
    name: str
    state: str
    url: str
    #: The box's tooltip (the full name, its state and timing).
    title: str
    #: The ids of the steps it waits for.
    after: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class Box:
    node: Node
    layer: int
    x: float
    y: float
    width: float
    height: float
    label: str
    label_x: float
    label_y: float


@dataclass(frozen=True)
class Edge:
    source: uuid.UUID
    target: uuid.UUID
    d: str


@dataclass(frozen=True)
class Part:
    """One state's share of a summary bar."""

    state: str
    count: int
    x: float
    width: float


@dataclass(frozen=True)
class Band:
    """A summary bar: the steps of one layer, or of a band of layers."""

    label: str
    steps: int
    y: float
    parts: tuple[Part, ...]
    text_y: float
    count_x: float


@dataclass(frozen=True)
class Picture:
    width: float
    height: float
    direction: str
    steps: int
    layers: int
    #: Set when the picture is a summary by layer rather than a box per step.
    summary: bool
    boxes: tuple[Box, ...] = ()
    edges: tuple[Edge, ...] = ()
    bands: tuple[Band, ...] = ()
    label_x: float = MARGIN


def draw(nodes: Sequence[Node]) -> Picture:
    """The picture of `nodes`: a box per step, or above the limits a summary."""
    layer_of = layers(nodes)
    known = set(layer_of)
    edge_count = sum(1 for node in nodes for dep in node.after if dep in known)
    depth = max(layer_of.values(), default=-1) + 1
    if len(nodes) > MAX_BOXES or edge_count > MAX_EDGES:
        return _summary(nodes, layer_of, depth)
    return _boxes(nodes, layer_of, depth)


def layers(nodes: Iterable[Node]) -> dict[uuid.UUID, int]:
    """Each step's layer: 0 without dependencies, else one past its deepest
    dependency's (the longest path to it). Dependencies outside `nodes` are
    ignored; a cycle, which `Workflow.add` cannot write, leaves its steps out."""
    by_id = {node.id: node for node in nodes}
    waiting = {node.id: sum(1 for dep in set(node.after) if dep in by_id) for node in nodes}
    dependents: dict[uuid.UUID, list[uuid.UUID]] = {node.id: [] for node in nodes}
    for node in nodes:
        for dep in set(node.after):
            if dep in by_id:
                dependents[dep].append(node.id)
    layer_of = {ident: 0 for ident, count in waiting.items() if count == 0}
    ready = list(layer_of)
    while ready:
        ident = ready.pop()
        for child in dependents[ident]:
            layer_of[child] = max(layer_of.get(child, 0), layer_of[ident] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return {node.id: layer_of[node.id] for node in nodes if node.id in layer_of}


def _boxes(nodes: Sequence[Node], layer_of: dict[uuid.UUID, int], depth: int) -> Picture:
    """A box per step, layers ordered by `_order`, arrows routed between them."""
    drawn = [node for node in nodes if node.id in layer_of]
    rows = _order(drawn, layer_of, depth)
    widest = max((len(row) for row in rows), default=0)
    direction = RIGHT if depth <= widest else DOWN
    if direction == RIGHT:
        along, across = BOX_WIDTH + ALONG_GAP_RIGHT, BOX_HEIGHT + ACROSS_GAP_RIGHT
    else:
        along, across = BOX_HEIGHT + ALONG_GAP_DOWN, BOX_WIDTH + ACROSS_GAP_DOWN
    boxes: dict[uuid.UUID, Box] = {}
    for layer, row in enumerate(rows):
        offset = (widest - len(row)) / 2
        for index, node in enumerate(row):
            first, second = MARGIN + layer * along, MARGIN + (offset + index) * across
            x, y = (first, second) if direction == RIGHT else (second, first)
            boxes[node.id] = Box(
                node=node,
                layer=layer,
                x=x,
                y=y,
                width=BOX_WIDTH,
                height=BOX_HEIGHT,
                label=_label(node.name),
                label_x=x + 8,
                label_y=y + BOX_HEIGHT / 2,
            )
    router = Router(
        boxes.values(),
        right=direction == RIGHT,
        along=BOX_WIDTH if direction == RIGHT else BOX_HEIGHT,
        across=BOX_HEIGHT if direction == RIGHT else BOX_WIDTH,
        gap=ACROSS_GAP_RIGHT if direction == RIGHT else ACROSS_GAP_DOWN,
    )
    edges = [
        Edge(source=dep, target=node.id, d=router.path(boxes[dep], boxes[node.id]))
        for node in drawn
        for dep in dict.fromkeys(node.after)
        if dep in boxes
    ]
    if direction == RIGHT:
        width = _extent(depth, along, BOX_WIDTH)
        height = _extent(widest, across, BOX_HEIGHT)
    else:
        width = _extent(widest, across, BOX_WIDTH)
        height = _extent(depth, along, BOX_HEIGHT)
    return Picture(
        width=width,
        height=height,
        direction=direction,
        steps=len(nodes),
        layers=depth,
        summary=False,
        boxes=tuple(boxes.values()),
        edges=tuple(edges),
    )


def _extent(count: int, step: float, box: float) -> float:
    """The room `count` boxes `step` apart take, with the margins."""
    return 2 * MARGIN + (count - 1) * step + box if count else 2 * MARGIN


def _order(nodes: Sequence[Node], layer_of: dict[uuid.UUID, int], depth: int) -> list[list[Node]]:
    """The steps of each layer, ordered to cut crossings: barycentre sweeps,
    alternately by dependencies (down) and by dependents (up), keeping the
    order with the fewest crossings between adjacent layers."""
    rows: list[list[Node]] = [[] for _ in range(depth)]
    for node in nodes:
        rows[layer_of[node.id]].append(node)
    before = {node.id: [dep for dep in node.after if dep in layer_of] for node in nodes}
    after: dict[uuid.UUID, list[uuid.UUID]] = {node.id: [] for node in nodes}
    for node in nodes:
        for dep in before[node.id]:
            after[dep].append(node.id)
    position = _positions(rows)
    best, fewest = [list(row) for row in rows], _crossings(rows, before, position)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        neighbours = before if down else after
        for layer in range(1, depth) if down else range(depth - 2, -1, -1):
            row = rows[layer]
            row.sort(key=lambda node: _barycentre(node.id, neighbours, position))
            position.update(_positions([row]))
        crossed = _crossings(rows, before, position)
        if crossed < fewest:
            best, fewest = [list(row) for row in rows], crossed
    return best


def _positions(rows: Iterable[list[Node]]) -> dict[uuid.UUID, float]:
    """Each step's place across its layer, centred, so layers of different
    sizes compare (a layer is drawn centred on the widest)."""
    return {node.id: index - (len(row) - 1) / 2 for row in rows for index, node in enumerate(row)}


def _barycentre(
    ident: uuid.UUID, neighbours: dict[uuid.UUID, list[uuid.UUID]], position: dict[uuid.UUID, float]
) -> float:
    around = [position[other] for other in neighbours[ident]]
    return sum(around) / len(around) if around else position[ident]


def _crossings(
    rows: list[list[Node]],
    before: dict[uuid.UUID, list[uuid.UUID]],
    position: dict[uuid.UUID, float],
) -> int:
    """The crossings of edges between adjacent layers (a pair of edges whose
    ends are in opposite orders); edges that skip layers are not counted."""
    layer_of = {node.id: layer for layer, row in enumerate(rows) for node in row}
    total = 0
    for layer in range(1, len(rows)):
        ends = sorted(
            (position[dep], position[node.id])
            for node in rows[layer]
            for dep in before[node.id]
            if layer_of[dep] == layer - 1
        )
        # Sorted by their starts, two edges cross where the later ends
        # strictly before the earlier: count those inversions, right to left.
        seen: list[float] = []
        for _, end in reversed(ends):
            total += bisect.bisect_left(seen, end)
            bisect.insort(seen, end)
    return total


def _label(name: str) -> str:
    """The name as its box shows it: whole, or cut with "…" (whole in the tooltip)."""
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"


def _summary(nodes: Sequence[Node], layer_of: dict[uuid.UUID, int], depth: int) -> Picture:
    """A bar per layer (or band of layers), as long as its steps are many,
    split by state in the order `states` are first met."""
    per_band = max(1, -(-depth // MAX_BANDS))
    counts: list[Counter[str]] = [Counter() for _ in range(-(-depth // per_band))]
    for node in nodes:
        if node.id in layer_of:
            counts[layer_of[node.id] // per_band][node.state] += 1
    order = list(dict.fromkeys(node.state for node in nodes))
    most = max((sum(count.values()) for count in counts), default=0) or 1
    bands = []
    for index, count in enumerate(counts):
        y = MARGIN + index * (BAND_HEIGHT + BAND_GAP)
        first, last = index * per_band + 1, min((index + 1) * per_band, depth)
        label = f"layer {first}" if first == last else f"layers {first} to {last}"
        x: float = MARGIN + BAND_LABEL
        parts = []
        for state in order:
            if count[state]:
                width = max(2.0, round(BAND_BAR * count[state] / most, 1))
                parts.append(Part(state=state, count=count[state], x=x, width=width))
                x += width
        bands.append(
            Band(
                label=label,
                steps=sum(count.values()),
                y=y,
                parts=tuple(parts),
                text_y=y + BAND_HEIGHT / 2,
                count_x=x + 6,
            )
        )
    return Picture(
        width=2 * MARGIN + BAND_LABEL + BAND_BAR + BAND_COUNT,
        height=2 * MARGIN + len(bands) * (BAND_HEIGHT + BAND_GAP) - BAND_GAP,
        direction=DOWN,
        steps=len(nodes),
        layers=depth,
        summary=True,
        bands=tuple(bands),
        label_x=MARGIN + BAND_LABEL - 8,
    )
