"""The dashboard's live charts as SVG geometry: numbers in, coordinates out.

One pair of charts per queue, from the runners' per-minute counts
(`jobs.metrics.minutes`, read by `jobs.stats.collect`): attempts done and
failed per minute as stacked bars with the attempts started as a line, and
the wait from due to start, p50 and p95, as two lines. Nothing here is HTML:
the template draws the shapes and escapes every label; no script, no asset
from outside the package, so the page works offline and under a strict CSP.
"""

from __future__ import annotations

import math
from typing import Any

from django.utils import timezone

from jobs.metrics.minutes import Minute

#: The geometry, in SVG user units (a chart scales to the page's width).
LEFT, TOP, BAR, HEIGHT, BOTTOM = 52, 12, 10, 110, 28


def queue_charts(per_minute: dict[str, list[Minute]]) -> list[dict[str, Any]]:
    """Each queue's two charts, queues in name order."""
    return [
        {"queue": queue, "counts": counts_chart(minutes), "latency": latency_chart(minutes)}
        for queue, minutes in per_minute.items()
    ]


def _frame(minutes: list[Minute], peak: float, peak_label: str) -> dict[str, Any]:
    """What both charts share: axes, grid, the minute ticks, the scale's labels."""
    base = TOP + HEIGHT
    right = LEFT + len(minutes) * BAR
    ticks = [
        {"x": LEFT + index * BAR + BAR / 2, "label": f"{timezone.localtime(m.minute):%H:%M}"}
        for index, m in ((i, minutes[i]) for i in (0, len(minutes) // 2, len(minutes) - 1))
    ]
    return {
        "width": right + 8,
        "height": base + BOTTOM,
        "left": LEFT,
        "right": right,
        "top": TOP,
        "base": base,
        "plot_height": HEIGHT,
        "middle": TOP + HEIGHT / 2,
        "label_x": LEFT - 6,
        "tick_y": base + 16,
        "peak": peak,
        "peak_label": peak_label,
        "ticks": ticks,
        "minutes": len(minutes),
    }


def counts_chart(minutes: list[Minute]) -> dict[str, Any]:
    """Done and failed attempts per minute as bars (failed on done), and
    started as a line over them."""
    peak = max((max(m.done + m.failed, m.started) for m in minutes), default=0)
    scale = HEIGHT / peak if peak else 0.0
    base = TOP + HEIGHT
    bars = []
    started = []
    for index, m in enumerate(minutes):
        x = LEFT + index * BAR
        done_height = round(m.done * scale, 1)
        failed_height = round(m.failed * scale, 1)
        bars.append(
            {
                "x": x + 1,
                "width": BAR - 2,
                "done_y": round(base - done_height, 1),
                "done_height": done_height,
                "failed_y": round(base - done_height - failed_height, 1),
                "failed_height": failed_height,
                "label": f"{timezone.localtime(m.minute):%H:%M}: {m.started} started, "
                f"{m.done} done, {m.failed} failed",
            }
        )
        started.append(f"{x + BAR / 2:g},{round(base - m.started * scale, 1):g}")
    return {
        **_frame(minutes, peak, f"{peak:g}"),
        "half": f"{peak / 2:g}",
        "bars": bars,
        "started_points": " ".join(started),
        "started": sum(m.started for m in minutes),
        "done": sum(m.done for m in minutes),
        "failed": sum(m.failed for m in minutes),
    }


#: The latency chart's floor: waits are drawn on a log scale from 1 ms, since
#: a p95 of seconds beside a p50 of milliseconds would flatten the p50 to 0.
FLOOR = 0.001


def latency_chart(minutes: list[Minute]) -> dict[str, Any]:
    """The wait from due to start per minute, p50 and p95, as lines broken
    where a minute started nothing, on a log scale from `FLOOR` to the
    highest p95 (at least ten times the floor)."""
    peak = max(max((m.p95 or 0.0 for m in minutes), default=0.0), FLOOR * 10)
    span = math.log(peak / FLOOR)
    base = TOP + HEIGHT

    def height(value: float) -> float:
        return HEIGHT * math.log(max(value, FLOOR) / FLOOR) / span

    def path(values: list[float | None]) -> str:
        steps, drawing = [], False
        for index, value in enumerate(values):
            if value is None:
                drawing = False
                continue
            x, y = LEFT + index * BAR + BAR / 2, round(base - height(value), 1)
            steps.append(f"{'L' if drawing else 'M'}{x:g},{y:g}")
            drawing = True
        return " ".join(steps)

    p95s = [m.p95 for m in minutes if m.p95 is not None]
    p50s = [m.p50 for m in minutes if m.p50 is not None]
    return {
        **_frame(minutes, peak, seconds(peak)),
        "half": seconds(math.sqrt(peak * FLOOR)),
        "floor": seconds(FLOOR),
        "p50_path": path([m.p50 for m in minutes]),
        "p95_path": path([m.p95 for m in minutes]),
        "p50_last": seconds(p50s[-1]) if p50s else None,
        "p95_last": seconds(p95s[-1]) if p95s else None,
        "p95_peak": seconds(max(p95s)) if p95s else None,
    }


def seconds(value: float) -> str:
    """A wait for a chart's label: "0 s", "4 ms", "1.5 s", "12 min"."""
    if value <= 0:
        return "0 s"
    if value < 1:
        return f"{value * 1000:.3g} ms"
    if value < 120:
        return f"{value:.3g} s"
    return f"{value / 60:.3g} min"
