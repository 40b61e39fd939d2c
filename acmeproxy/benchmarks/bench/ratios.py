"""Each figure against its raw loop or its pair, and the run against issue 24's
targets.

A rate on this machine moves by a factor of two from one hour to the next,
so a figure alone says little; the same figure divided by a raw loop
measured minutes from it is what can be compared across runs. Pure code.
"""

from __future__ import annotations

from collections.abc import Iterable

from acmeproxy.benchmarks.bench.measure import Check, Result

#: (name, numerator key, denominator key) for each ratio the report prints.
RATIOS = (
    ("drain as met / raw SKIP LOCKED batch loop", "drain.as_met", "ceiling.batch"),
    (
        "drain as met / raw settle-and-claim loop, 8 per statement",
        "drain.as_met",
        "ceiling.per_pass",
    ),
    ("drain under pgbench write load / quiet", "load.loaded", "load.quiet"),
    ("burst planned as empty / analyzed with its rows", "cold.empty_stats", "cold.analyzed"),
    ("drain with DEBUG=True / DEBUG=False", "debug.on", "debug.off"),
    ("enqueue, payload / raw INSERT+commit loop", "enqueue.as_met", "raw.enqueue"),
    ("enqueue with DEBUG=True / DEBUG=False", "enqueue.debug", "enqueue.as_met"),
    ("enqueue_many, payload / raw statement alone", "enqueue_many.as_met", "raw.enqueue_many"),
    ("workflow 1 → N → 1 drain / plain drain", "workflows.wide_drain", "workflows.plain_drain"),
    ("small workflows' drain / plain drain", "workflows.small_drain", "workflows.plain_drain"),
    ("favourable: burst drain, default / raw batch loop", "drain.burst", "ceiling.batch"),
    ("favourable: burst drain, tuned / raw batch loop", "drain.burst_tuned", "ceiling.batch"),
    ("favourable: burst drain, 2 lanes / raw batch loop", "drain.burst_lanes", "ceiling.batch"),
    ("favourable: enqueue, empty / raw loop, empty", "enqueue.empty", "raw.enqueue_empty"),
    (
        "favourable: enqueue_many, empty / raw statement, empty",
        "enqueue_many.empty",
        "raw.enqueue_many_empty",
    ),
)


def by_key(results: Iterable[Result]) -> dict[str, Result]:
    return {result.key: result for result in results if not result.skipped}


def ratio(results: dict[str, Result], numerator: str, denominator: str) -> float | None:
    """The rate of `numerator` over that of `denominator`, both of this run;
    None when either was not measured."""
    top, bottom = results.get(numerator), results.get(denominator)
    if top is None or bottom is None or not top.rate or not bottom.rate:
        return None
    return top.rate / bottom.rate


def ratio_lines(results: Iterable[Result]) -> list[tuple[str, str]]:
    """Every ratio both of whose figures this run measured, as a percentage."""
    found = by_key(results)
    lines = []
    for name, numerator, denominator in RATIOS:
        value = ratio(found, numerator, denominator)
        if value is not None:
            lines.append((name, f"{value:.0%}"))
    return lines


def _at_least(name: str, value: float | None, floor: float) -> Check:
    shown = None if value is None else f"{value:.0%}"
    return Check(name, f">= {floor:.0%}", shown, None if value is None else value >= floor)


def _below(name: str, value: float | None, ceiling_ms: float) -> Check:
    shown = None if value is None else f"{value:g} ms"
    return Check(name, f"< {ceiling_ms:g} ms", shown, None if value is None else value < ceiling_ms)


def _latency(found: dict[str, Result], key: str, name: str, vendor: str) -> list[Check]:
    numbers = found[key].numbers if key in found else {}
    commit = numbers.get("from_commit", {})
    if vendor == "sqlite":
        return [
            _below(f"{name}, p50 from before enqueue (SQLite)", numbers.get("p50"), 10),
            _below(f"{name}, p99 from before enqueue (SQLite)", numbers.get("p99"), 50),
        ]
    return [
        _below(f"{name}, p50 from before enqueue", numbers.get("p50"), 2.5),
        _below(f"{name}, p99 from before enqueue", numbers.get("p99"), 5),
        _below(f"{name}, p50 from commit", commit.get("p50"), 1.5),
        _below(f"{name}, p99 from commit", commit.get("p99"), 3),
    ]


#: Issue 37's goals: a workflow's steps drain at this share of the plain
#: drain's rate at least, and PostgreSQL enqueues 10,000 steps at this rate.
WORKFLOW_DRAIN_SHARE = 0.70
WORKFLOW_ENQUEUE_RATE = 20_000


def workflow_checks(found: dict[str, Result], vendor: str) -> list[Check]:
    """Issue 37's goals, when the workflows part ran (the enqueue rate is
    PostgreSQL's goal, judged only there)."""
    if not any(key.startswith("workflows.") for key in found):
        return []
    listed = [
        _at_least(
            "issue 37: workflow 1 → N → 1 drain vs plain",
            ratio(found, "workflows.wide_drain", "workflows.plain_drain"),
            WORKFLOW_DRAIN_SHARE,
        ),
        _at_least(
            "issue 37: small workflows' drain vs plain",
            ratio(found, "workflows.small_drain", "workflows.plain_drain"),
            WORKFLOW_DRAIN_SHARE,
        ),
    ]
    if vendor == "postgresql":
        enqueue = found.get("workflows.wide_enqueue")
        rate = enqueue.rate if enqueue is not None else None
        listed.append(
            Check(
                "issue 37: Workflow.enqueue of 1 → N → 1",
                f">= {WORKFLOW_ENQUEUE_RATE:,}/s",
                None if rate is None else f"{rate:,.0f}/s",
                None if rate is None else rate >= WORKFLOW_ENQUEUE_RATE,
            )
        )
    return listed


def checks(results: Iterable[Result], vendor: str) -> list[Check]:
    """Issue 24's targets that one run can judge (not "no figure regresses",
    which needs a run from before). Latency targets are PostgreSQL's and
    SQLite's: on MySQL/MariaDB nothing wakes a runner across processes, so a
    job waits for the poll by design."""
    found = by_key(results)
    listed = [
        _at_least(
            "drain as met vs raw batch loop",
            ratio(found, "drain.as_met", "ceiling.batch"),
            0.25,
        ),
        _at_least(
            "drain under write load vs quiet", ratio(found, "load.loaded", "load.quiet"), 0.50
        ),
        _at_least(
            "enqueue vs bare psycopg loop", ratio(found, "enqueue.as_met", "raw.enqueue"), 0.90
        ),
        _at_least(
            "enqueue_many vs raw statement",
            ratio(found, "enqueue_many.as_met", "raw.enqueue_many"),
            0.60,
        ),
        _at_least(
            "burst planned as empty vs analyzed",
            ratio(found, "cold.empty_stats", "cold.analyzed"),
            0.90,
        ),
        _at_least("drain, DEBUG=True vs DEBUG=False", ratio(found, "debug.on", "debug.off"), 0.85),
    ]
    if vendor in ("postgresql", "sqlite"):
        listed += _latency(found, "latency.as_met", "start latency", vendor)
        listed += _latency(found, "latency.after_sweep", "after drain and sweep", vendor)
    return listed + workflow_checks(found, vendor)
