"""Which parts run, in which order, at which sizes, and the header that says
where they ran.

Every selected part's as-met figures are measured first, then the favourable
ones, then scale: the as-met drains meet the table as the previous part
left it, never as a favourable part's VACUUM left it.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import connection
from django.utils import timezone

from acmeproxy.benchmarks.bench import (
    budget,
    bulk,
    ceiling,
    dashboard,
    drains,
    enqueue,
    instructions,
    latency,
    load,
    routing,
    scale,
    workflows,
)
from acmeproxy.benchmarks.bench.budget import Verdict
from acmeproxy.benchmarks.bench.measure import Check, Result, median_of, report_lines
from acmeproxy.benchmarks.bench.ratios import checks, ratio_lines

#: Every part, in the order they run; `benchjobs --part NAME` picks some.
PARTS = (
    "drain",
    "routing",
    "retry",
    "debug",
    "cold",
    "load",
    "latency",
    "enqueue",
    "ceiling",
    "scale",
)
#: Parts that run only when named: `instructions` needs valgrind and counts
#: for minutes, and answers a different question (has the cost crept?);
#: `bulk` answers issue 36's rule for operators' bulk actions, not the runner's;
#: `dashboard` writes 10 million rows first; `workflows` answers issue 37's
#: goals, not the queue's.
ON_REQUEST = ("instructions", "bulk", "dashboard", "workflows")
#: Every name `--part` accepts.
CHOICES = (*PARTS, *ON_REQUEST)


@dataclass(frozen=True)
class Sizes:
    #: Jobs in each drain and each raw claim loop, and in the drain before the sweep.
    jobs: int = 20_000
    #: `enqueue` calls, and specs in the one `enqueue_many` call.
    enqueues: int = 5_000
    #: Jobs the latency part enqueues, and the gap between them in seconds.
    latency_jobs: int = 200
    latency_gap: float = 0.02
    #: Settled rows beside the claim in scale (a tenth as many scheduled ones).
    settled: int = 1_000_000
    #: Claims timed in scale.
    samples: int = 200
    #: `pgbench -i -s`: 10 is a million accounts rows.
    pgbench_scale: int = 10
    #: Runs of the drain, debug, enqueue, workflows and instructions parts; the median is shown.
    repeat: int = 1
    #: Jobs each instructions measure divides by: the budget's fixed workload.
    instruction_jobs: int = 2_000
    #: Failed jobs the bulk part retries and redrives (beside as many done ones).
    bulk_rows: int = 100_000
    #: Settled rows beside the dashboard (issue 36's 10 million).
    dashboard_settled: int = 10_000_000
    #: The middle of the wide workflow, 1 → this → 1 (issue 37's 10,000).
    workflow_width: int = 10_000
    #: How many small workflows, each 1 → `small_workflow_width` → 1.
    small_workflows: int = 1_000
    small_workflow_width: int = 8


@dataclass
class Report:
    header: dict[str, str]
    results: list[Result]
    ratios: list[tuple[str, str]]
    checks: list[Check]
    #: The instruction counts against their budget (when that part ran).
    budget: list[Verdict] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = report_lines(self.header, self.results, self.ratios, self.checks)
        if self.budget:
            lines += ["", f"== Instruction budget ({budget.BUDGET_FILE.name}) =="]
            lines += [verdict.line() for verdict in self.budget]
        return lines

    def as_json(self) -> dict[str, object]:
        return {
            **self.header,
            "results": [result.__dict__ for result in self.results],
            "ratios": dict(self.ratios),
            "targets": [check.__dict__ | {"verdict": check.verdict} for check in self.checks],
            "budget": [verdict.__dict__ | {"within": verdict.within} for verdict in self.budget],
        }


def _as_met(part: str, sizes: Sizes) -> Callable[[], list[Result]] | None:
    n, e = sizes.jobs, sizes.enqueues
    return {
        "drain": lambda: drains.as_met(n),
        "routing": lambda: [*drains.as_met(n), *routing.routed(n)],
        "retry": lambda: drains.retrying(n),
        "debug": lambda: drains.debug_pair(n),
        "cold": lambda: drains.cold(n),
        "load": lambda: load.quiet_and_loaded(n, sizes.pgbench_scale),
        "latency": lambda: latency.as_met(sizes.latency_jobs, sizes.latency_gap, n),
        "enqueue": lambda: [
            enqueue.one_per_transaction(e),
            ceiling.insert_loop(e),
            enqueue.one_per_transaction(e, debug_on=True),
            enqueue.many(e),
            ceiling.insert_many_statement(e),
        ],
        "ceiling": lambda: [ceiling.batch_loop(n), ceiling.per_pass_loop(n)],
    }.get(part)


def _favourable(part: str, sizes: Sizes) -> Callable[[], list[Result]] | None:
    n, e = sizes.jobs, sizes.enqueues
    return {
        "drain": lambda: drains.favourable(n),
        "latency": lambda: [latency.same_process(sizes.latency_jobs, sizes.latency_gap)],
        "enqueue": lambda: [
            enqueue.one_per_transaction(e, with_payload=False),
            ceiling.insert_loop(e, with_payload=False),
            enqueue.many(e, with_payload=False),
            ceiling.insert_many_statement(e, with_payload=False),
        ],
    }.get(part)


#: Parts whose figures are rates worth repeating for a median.
REPEATED = ("drain", "routing", "retry", "debug", "enqueue")


def run(parts: Sequence[str], sizes: Sizes, progress: Callable[[str], None] = print) -> Report:
    """Measure `parts` (names from `CHOICES`) in `CHOICES` order."""
    chosen = [part for part in PARTS if part in parts]
    started = header()
    results: list[Result] = []
    for phase in (_as_met, _favourable):
        for part in chosen:
            measure = phase(part, sizes)
            if measure is None:
                continue
            progress(f"{part} ({'as met' if phase is _as_met else 'favourable'})")
            repeat = sizes.repeat if part in REPEATED else 1
            results += median_of(repeat, measure)
    if "scale" in chosen:
        progress("scale")
        results.append(
            scale.claim_against_history(sizes.samples, sizes.settled, sizes.settled // 10)
        )
    if "bulk" in parts:
        progress("bulk")
        results += bulk.measured(sizes.bulk_rows, sizes.jobs)
    if "dashboard" in parts:
        progress("dashboard")
        results.append(dashboard.answer_time(sizes.dashboard_settled))
    if "workflows" in parts:
        progress("workflows")
        results += median_of(
            sizes.repeat,
            lambda: workflows.measured(
                sizes.workflow_width, sizes.small_workflows, sizes.small_workflow_width
            ),
        )
    verdicts: list[Verdict] = []
    if "instructions" in parts:
        progress("instructions (callgrind)")
        figures = budget.read().get(connection.vendor, {})
        counts = instructions.counted(
            sizes.instruction_jobs, sizes.repeat, over=lambda now: budget.over(figures, now)
        )
        results += counts
        verdicts = budget.verdicts(figures, instructions.measured(counts))
    return Report(
        started, results, ratio_lines(results), checks(results, connection.vendor), verdicts
    )


def header() -> dict[str, str]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    lines = {
        "date": timezone.now().isoformat(timespec="seconds"),
        "machine": f"{platform.node()}, {platform.machine()}, {os.cpu_count()} cores"
        + (f", load average {load[0]:.1f} at start" if load else ""),
        "python": sys.version.split()[0],
        "database": describe_database(),
    }
    if connection.vendor == "postgresql":
        lines["autovacuum"] = autovacuum()
    return lines


def describe_database() -> str:
    if connection.vendor == "sqlite":
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version} ({connection.settings_dict['NAME']})"
    statement = "SHOW server_version" if connection.vendor == "postgresql" else "SELECT VERSION()"
    with connection.cursor() as cursor:
        cursor.execute(statement)
        row = cursor.fetchone()
    return f"{connection.vendor} {row[0] if row else '?'} ({connection.settings_dict['NAME']})"


def autovacuum() -> str:
    """Whether autovacuum is on, and where that was set when it is not: with it
    off, the statistics are whatever the last ANALYZE saw and dead rows stay."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting, sourcefile FROM pg_settings WHERE name = 'autovacuum'")
        row = cursor.fetchone()
    if row is None:
        return "unknown"
    setting, source = row
    if setting == "on":
        return "on"
    where = f" (set in {source})" if source else ""
    return (
        f"OFF{where}: no automatic ANALYZE or VACUUM here, so the planner's statistics are "
        "whatever the last ANALYZE saw, and deleted rows stay as dead tuples"
    )
