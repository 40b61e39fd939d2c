"""The workflow graph's arrows (`jobs.admin.workflow_graph`): a path from each
dependency to its dependent that never runs through another step's box.

An arrow between adjacent layers is one curve across the gap between them,
where no box is. One that skips layers (a step waiting on a dependency two
layers back, beside a nearer one) would cut straight through the boxes in
between, reading as if it waited on them; so in each layer it crosses it runs
along a lane, the gap between two boxes nearest the straight line (or the
line itself, where it falls in a gap or beyond the layer's ends), and curves
from lane to lane across the gaps between layers. The boxes stay where the
layout put them: no room is made for lanes, so arrows may share one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Protocol


class Placed(Protocol):
    """A box as the layout placed it."""

    @property
    def layer(self) -> int: ...
    @property
    def x(self) -> float: ...
    @property
    def y(self) -> float: ...


class Router:
    """Paths between the boxes of one layout: its layers run left to right
    when `right`, else top to bottom; its boxes are `along` by `across` in
    that direction, `gap` apart across it."""

    def __init__(
        self,
        boxes: Iterable[Placed],
        *,
        right: bool,
        along: float,
        across: float,
        gap: float,
    ) -> None:
        self.right, self.along, self.across, self.gap = right, along, across, gap
        self.starts: dict[int, list[float]] = {}
        self.first: dict[int, float] = {}
        for box in boxes:
            self.starts.setdefault(box.layer, []).append(self._across_of(box))
            self.first[box.layer] = self._along_of(box)
        for starts in self.starts.values():
            starts.sort()

    def path(self, source: Placed, target: Placed) -> str:
        """From `source`'s far side to `target`'s near side, stopping short of
        it for the arrowhead; through a lane of each layer between them."""
        start = (self._along_of(source) + self.along, self._across_of(source) + self.across / 2)
        end = (self._along_of(target) - 2, self._across_of(target) + self.across / 2)
        points = [start]
        span = target.layer - source.layer
        for step in range(1, span):
            layer = source.layer + step
            lane = self._lane(layer, start[1] + (end[1] - start[1]) * step / span)
            entry = self.first.get(layer, start[0])
            points += [(entry, lane), (entry + self.along, lane)]
        points.append(end)
        drawn = [f"M{self._xy(points[0])}"]
        for index in range(1, len(points)):
            (a_along, a_across), (b_along, b_across) = points[index - 1], points[index]
            if index % 2:  # across a gap between layers: a curve
                bend = (b_along - a_along) / 2
                drawn.append(
                    f"C{self._xy((a_along + bend, a_across))} "
                    f"{self._xy((b_along - bend, b_across))} {self._xy(points[index])}"
                )
            else:  # along a lane, through a layer
                drawn.append(f"L{self._xy(points[index])}")
        return " ".join(drawn)

    def _lane(self, layer: int, wanted: float) -> float:
        """Where an arrow wanting to cross `layer` at `wanted` crosses it: the
        middle of the gap it falls in, or of the gap beside the box it falls
        on (the nearer side); beyond the layer's ends, `wanted` itself."""
        starts = self.starts.get(layer, [])
        if not starts:
            return wanted
        half = self.gap / 2
        index = bisect.bisect_right(starts, wanted) - 1
        if index < 0:
            return min(wanted, starts[0] - half)
        top = starts[index]
        if wanted > top + self.across:
            last = index == len(starts) - 1
            return max(wanted, top + self.across + half) if last else top + self.across + half
        before, after = top - half, top + self.across + half
        return before if wanted - before < after - wanted else after

    def _along_of(self, box: Placed) -> float:
        return box.x if self.right else box.y

    def _across_of(self, box: Placed) -> float:
        return box.y if self.right else box.x

    def _xy(self, point: tuple[float, float]) -> str:
        along, across = point
        x, y = (along, across) if self.right else (across, along)
        return f"{round(x, 1):g},{round(y, 1):g}"
