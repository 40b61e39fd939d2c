"""What a part hands back, and the arithmetic on it: rates, percentiles, the
median of repeated runs, and the table a person reads.

Pure code: nothing here touches the database, so all of it is unit-tested.
Each result says which setup it was measured under (`AS_MET`, `RAW`,
`FAVOURABLE`, `SCALE`, `INSTRUCTIONS`), because a figure read without its
setup is how the old benchmark's numbers came to be quoted as what users get.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Measured the way a user meets the queue: payload jobs, a runner already
#: running, completion and latency seen from another process, no tuning of
#: the table before the run.
AS_MET = "as met"
#: A bare psycopg loop doing the same database work without the queue's code:
#: what each as-met figure is read against, in the same run.
RAW = "raw"
#: Today's figures, kept for comparison, under setups that flatter the queue
#: (analyzed table, empty payloads, runner started after queueing,
#: latency seen from the enqueuing process).
FAVOURABLE = "favourable"
#: How a claim's cost moves as history grows.
SCALE = "scale"
#: Instructions executed, counted by callgrind: the budget a change is held to.
INSTRUCTIONS = "instructions"

GROUPS = (AS_MET, RAW, FAVOURABLE, SCALE, INSTRUCTIONS)
GROUP_TITLES = {
    AS_MET: "As users meet it",
    RAW: "Raw loops, same run (the ceilings the ratios divide by)",
    FAVOURABLE: "Favourable setups (today's figures, labelled by what flatters them)",
    SCALE: "Scale",
    INSTRUCTIONS: "Instructions executed (callgrind, every thread)",
}


@dataclass
class Result:
    """One measured figure. `key` is stable (ratios and tests find results by
    it); `label` says what was measured and under which setup."""

    key: str
    label: str
    group: str
    numbers: dict[str, Any] = field(default_factory=dict)
    #: Why the part did not run here (a vendor it does not apply to).
    skipped: str | None = None

    @property
    def rate(self) -> float | None:
        value = self.numbers.get("jobs_per_second")
        return float(value) if value else None


def skipped(key: str, label: str, group: str, reason: str) -> Result:
    return Result(key, label, group, skipped=reason)


def per_second(count: int, seconds: float) -> int | None:
    """`count` in `seconds` as a whole rate; None for a zero duration."""
    return round(count / seconds) if seconds > 0 else None


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `fraction`
    of the values at or below it. Nearest-rank, not interpolated, so a p99 of
    200 samples is a latency some job really waited."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def latency_summary(waits_ms: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 and the worst of `waits_ms`, rounded to 0.01 ms."""
    return {
        name: round(percentile(waits_ms, fraction), 2)
        for name, fraction in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
    }


def median_of(repeat: int, run: Callable[[], list[Result]]) -> list[Result]:
    """`run` `repeat` times; for each result key, the run with the median rate,
    with every run's rate beside it in run order (one run on this 2-core
    machine can differ from the next by a third)."""
    runs = [run() for _ in range(max(1, repeat))]
    chosen = []
    for results in zip(*runs, strict=True):
        ordered = sorted(results, key=lambda result: result.rate or 0)
        median = ordered[len(ordered) // 2]
        if len(results) > 1:
            median.numbers["runs_jobs_per_second"] = [result.rate for result in results]
        chosen.append(median)
    return chosen


def headline(result: Result) -> str:
    """The one figure a reader looks for first."""
    if result.skipped:
        return "skipped"
    numbers = result.numbers
    if "jobs_per_second" in numbers:
        return f"{numbers['jobs_per_second']:,} jobs/s" if numbers["jobs_per_second"] else "-"
    if "p50" in numbers:
        return f"p50 {numbers['p50']} / p99 {numbers['p99']} ms"
    if "ratio" in numbers:
        return f"x{numbers['ratio']}"
    if "instructions" in numbers:
        return f"{numbers['instructions']:,} instructions"
    return ""


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def details(result: Result) -> str:
    if result.skipped:
        return result.skipped
    return ", ".join(f"{name}={_shown(value)}" for name, value in result.numbers.items())


@dataclass
class Check:
    """A figure of the run against one of issue 24's targets."""

    name: str
    target: str
    #: The figure as it reads, e.g. "31%" or "2.1 ms"; None when the run did
    #: not measure what the check needs.
    value: str | None
    met: bool | None

    @property
    def verdict(self) -> str:
        if self.met is None:
            return "not measured"
        return "met" if self.met else "NOT MET"


def report_lines(
    header: dict[str, str],
    results: Iterable[Result],
    ratios: Iterable[tuple[str, str]],
    checks: Iterable[Check],
) -> list[str]:
    """The printed report: header, then the as-met figures with their raw
    loops, ratios and targets, then the favourable figures, then scale."""
    lines = [f"{name}: {value}" for name, value in header.items()]
    by_group: dict[str, list[Result]] = {group: [] for group in GROUPS}
    for result in results:
        by_group[result.group].append(result)
    width = max([len(r.label) for rs in by_group.values() for r in rs] + [40])

    def section(title: str, rows: list[str]) -> None:
        if rows:
            lines.extend(["", f"== {title} ==", *rows])

    def figures(group: str) -> list[str]:
        return [
            f"{r.label:<{width}}  {headline(r):>24}  {details(r)}".rstrip() for r in by_group[group]
        ]

    section(GROUP_TITLES[AS_MET], figures(AS_MET))
    section(GROUP_TITLES[RAW], figures(RAW))
    ratio_rows = list(ratios)
    ratio_width = max([len(name) for name, _ in ratio_rows] + [40])
    section("Ratios, same run", [f"{name:<{ratio_width}}  {value}" for name, value in ratio_rows])
    check_rows = list(checks)
    check_width = max([len(check.name) for check in check_rows] + [40])
    section(
        "Issue 24's targets",
        [
            f"{c.name:<{check_width}}  {c.target:<14} {c.value or '-':>12}  {c.verdict}"
            for c in check_rows
        ],
    )
    section(GROUP_TITLES[FAVOURABLE], figures(FAVOURABLE))
    section(GROUP_TITLES[SCALE], figures(SCALE))
    section(GROUP_TITLES[INSTRUCTIONS], figures(INSTRUCTIONS))
    return lines
