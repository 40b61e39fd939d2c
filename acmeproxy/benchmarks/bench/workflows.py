"""Workflows (issue 37) as users meet them: `Workflow.enqueue` and the drain of
its steps by one runner, beside the plain drain of as many jobs in the same
run, since this machine's speed moves from hour to hour.

Two shapes: one wide workflow, 1 → `width` → 1 (a fan-out then a fan-in,
whose last step waits for every middle one), and `count` small ones of
1 → `small` → 1, all enqueued in one transaction. Each step is a no-op job
with the bench payload. The drains follow `drains.into_running`: an ordinary
`runjobs` already running and idle, the rows committed at once, the rate
from their commit until this process sees none live; no ANALYZE, VACUUM or
warm-up before. Enqueue is timed around `Workflow.enqueue` alone (building
the workflow in memory is the caller's, and shown apart).

Runs on request (`benchjobs --part workflows`). Its rows are bench jobs
(deleted as every part deletes them) and the workflows, steps and edges of
workflows named `bench.`, deleted after each shape.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction

from acmeproxy.benchmarks.bench import stage
from acmeproxy.benchmarks.bench.drains import into_running
from acmeproxy.benchmarks.bench.measure import AS_MET, Result, per_second
from acmeproxy.benchmarks.bench.runner import Runner
from acmeproxy.benchmarks.jobs import NOOP, PREFIX, payload
from jobs import JobSpec, Workflow
from jobs.models import Dependency, WorkflowStep
from jobs.models import Workflow as WorkflowRow

#: The figures' keys: the ratios and the checks find them by these.
PLAIN = "workflows.plain_drain"
WIDE_ENQUEUE = "workflows.wide_enqueue"
WIDE_DRAIN = "workflows.wide_drain"
SMALL_ENQUEUE = "workflows.small_enqueue"
SMALL_DRAIN = "workflows.small_drain"


def clean() -> None:
    """Delete the bench jobs and every row of the bench's workflows."""
    stage.clean()
    ours = WorkflowRow.objects.filter(name__startswith=PREFIX)
    steps = WorkflowStep.objects.filter(workflow_id__in=ours.values("id"))
    Dependency.objects.filter(step_id__in=steps.values("job_id")).delete()
    steps.delete()
    ours.delete()


def fan(workflow: Workflow, width: int, prefix: str, first: int) -> int:
    """Add 1 → `width` → 1 no-op steps to `workflow`, keys `prefix<n>` from
    `first`; how many steps were added."""

    def spec(n: int) -> JobSpec:
        return JobSpec.now(NOOP, f"{prefix}{n}").with_payload(payload(n))

    head = workflow.add(spec(first), name=f"{first}")
    middle = [
        workflow.add(spec(n), after=(head,), name=f"{n}")
        for n in range(first + 1, first + 1 + width)
    ]
    workflow.add(spec(first + 1 + width), after=middle, name=f"{first + 1 + width}")
    return width + 2


def _drained(runner: Runner, steps: int, committed: float) -> dict[str, Any]:
    finished = runner.wait_until_done(NOOP, steps)
    return {"steps": steps, "jobs_per_second": per_second(steps, finished - committed)}


def wide(runner: Runner, width: int) -> list[Result]:
    """One workflow 1 → `width` → 1: its enqueue, then its drain by `runner`."""
    clean()
    started = time.perf_counter()
    workflow = Workflow(f"{PREFIX}wide")
    steps = fan(workflow, width, "w", 0)
    built = time.perf_counter()
    workflow.enqueue()
    committed_at = time.monotonic()
    enqueued = time.perf_counter()
    drained = _drained(runner, steps, committed_at)
    clean()
    return _results(
        (WIDE_ENQUEUE, WIDE_DRAIN),
        f"one workflow 1 → {width:,} → 1",
        steps,
        enqueued - built,
        drained,
        build_seconds=round(built - started, 3),
    )


def small(runner: Runner, count: int, width: int) -> list[Result]:
    """`count` workflows 1 → `width` → 1, enqueued in one transaction (so the
    runner meets them committed at once), then drained by `runner`."""
    clean()
    workflows = []
    steps = 0
    for n in range(count):
        workflow = Workflow(f"{PREFIX}small")
        steps += fan(workflow, width, f"s{n}.", 0)
        workflows.append(workflow)
    started = time.perf_counter()
    with transaction.atomic():
        for workflow in workflows:
            workflow.enqueue()
    committed_at = time.monotonic()
    enqueued = time.perf_counter()
    drained = _drained(runner, steps, committed_at)
    clean()
    return _results(
        (SMALL_ENQUEUE, SMALL_DRAIN),
        f"{count:,} x (1 → {width} → 1), one transaction",
        steps,
        enqueued - started,
        drained,
    )


def _results(
    keys: tuple[str, str],
    shape: str,
    steps: int,
    seconds: float,
    drained: dict[str, Any],
    **extra: Any,
) -> list[Result]:
    """A shape's two figures: its enqueue's rate and time, and its drain."""
    enqueue, drain = keys
    numbers = {
        "steps": steps,
        "jobs_per_second": per_second(steps, seconds),
        "enqueue_seconds": round(seconds, 3),
        **extra,
    }
    label = shape.removesuffix(", one transaction")
    return [
        Result(enqueue, f"Workflow.enqueue, {shape} (steps/s)", AS_MET, numbers),
        Result(drain, f"drain of {label}, runner running (steps/s)", AS_MET, drained),
    ]


def measured(width: int, count: int, small_width: int) -> list[Result]:
    """The plain drain of as many jobs as the wide workflow has steps, then the
    wide workflow, then the small ones, all into the same running runner."""
    try:
        with stage.config(), Runner() as runner:
            plain = into_running(
                runner, width + 2, PLAIN, f"plain drain of {width + 2:,} jobs, same runner"
            )
            return [plain, *wide(runner, width), *small(runner, count, small_width)]
    finally:
        clean()
