"""`python manage.py benchjobs`: parse the arguments, run `benchmarks.bench.suite`, print."""

from __future__ import annotations

import json
from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection

from jobs import log


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ArgumentTypeError(f"takes a whole number, not {text!r}") from None
    if value < 1:
        raise ArgumentTypeError(f"must be at least 1, not {value}")
    return value


class Command(BaseCommand):
    help = "Measure the queue on the database DATABASE_URL names (a scratch one, please)."
    # Django's checks would reach the database before `handle` can report a
    # missing one clearly; the migrate below finds the same faults.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        from acmeproxy.benchmarks.bench.suite import CHOICES, ON_REQUEST, Sizes

        defaults = Sizes()
        parser.add_argument(
            "--part",
            choices=CHOICES,
            action="append",
            help=(
                f"Run only this part (repeatable): {', '.join(CHOICES)}. Default: all "
                f"but {', '.join(ON_REQUEST)}, which run only when named."
            ),
        )
        parser.add_argument(
            "--jobs",
            type=_at_least_one,
            default=defaults.jobs,
            help=f"Jobs in each drain and raw claim loop ({defaults.jobs}).",
        )
        parser.add_argument(
            "--enqueues",
            type=_at_least_one,
            default=defaults.enqueues,
            help=f"Enqueue calls, and specs in the enqueue_many call ({defaults.enqueues}).",
        )
        parser.add_argument(
            "--latency-jobs",
            type=_at_least_one,
            default=defaults.latency_jobs,
            help=f"Jobs the latency part enqueues, 20 ms apart ({defaults.latency_jobs}).",
        )
        parser.add_argument(
            "--settled",
            type=_at_least_one,
            default=defaults.settled,
            help=f"History rows for scale ({defaults.settled}).",
        )
        parser.add_argument(
            "--dashboard-settled",
            type=_at_least_one,
            default=defaults.dashboard_settled,
            help=f"Settled rows beside the dashboard part ({defaults.dashboard_settled}).",
        )
        parser.add_argument(
            "--pgbench-scale",
            type=_at_least_one,
            default=defaults.pgbench_scale,
            help=f"pgbench -i -s for the load part ({defaults.pgbench_scale}).",
        )
        parser.add_argument(
            "--repeat",
            type=_at_least_one,
            default=defaults.repeat,
            help=(
                "Runs of the drain, debug, enqueue, workflows and instructions parts; "
                "the median run is shown (1)."
            ),
        )
        parser.add_argument(
            "--bulk-rows",
            type=_at_least_one,
            default=defaults.bulk_rows,
            help=f"Failed jobs the bulk part retries and redrives ({defaults.bulk_rows:,}).",
        )
        parser.add_argument(
            "--workflow-width",
            type=_at_least_one,
            default=defaults.workflow_width,
            help=f"The middle of the wide workflow, 1 → N → 1 ({defaults.workflow_width:,}).",
        )
        parser.add_argument(
            "--small-workflows",
            type=_at_least_one,
            default=defaults.small_workflows,
            help=(
                f"Workflows of 1 → {defaults.small_workflow_width} → 1 in the workflows part "
                f"({defaults.small_workflows:,})."
            ),
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help=(
                "With --part instructions: exit non-zero when a count exceeds its "
                "budget (acmeproxy/benchmarks/instruction-budget.json) by more than 2 %%."
            ),
        )
        parser.add_argument(
            "--write-budget",
            action="store_true",
            help="With --part instructions: write the counts as this database's budget.",
        )
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        from acmeproxy.benchmarks import jobs as handlers
        from acmeproxy.benchmarks.bench import budget
        from acmeproxy.benchmarks.bench.suite import PARTS, Sizes, run

        handlers.serve(in_children=True)  # here and in every runner the benchmark starts

        parts = options["part"] or PARTS
        if (options["check"] or options["write_budget"]) and "instructions" not in parts:
            raise CommandError("--check and --write-budget go with --part instructions")
        try:
            # A scratch database is usually a fresh one: bring its tables up first.
            call_command("migrate", interactive=False, verbosity=0)
        except DatabaseError as error:
            raise CommandError(
                f"cannot use the database DATABASE_URL names: {log.first_line(error)}"
            ) from error
        sizes = Sizes(
            jobs=options["jobs"],
            enqueues=options["enqueues"],
            latency_jobs=options["latency_jobs"],
            settled=options["settled"],
            dashboard_settled=options["dashboard_settled"],
            pgbench_scale=options["pgbench_scale"],
            repeat=options["repeat"],
            bulk_rows=options["bulk_rows"],
            workflow_width=options["workflow_width"],
            small_workflows=options["small_workflows"],
        )
        report = run(parts, sizes, progress=lambda part: self.stderr.write(f"measuring {part}..."))
        if options["json"]:
            self.stdout.write(json.dumps(report.as_json(), indent=2, default=str))
        else:
            for line in report.lines():
                self.stdout.write(line)
        if options["write_budget"]:
            counts = {verdict.measure: verdict.measured for verdict in report.budget}
            budget.write(connection.vendor, counts)
            self.stderr.write(f"wrote the {connection.vendor} budget to {budget.BUDGET_FILE}")
        elif options["check"]:
            failures = [verdict.failure() for verdict in report.budget if not verdict.within]
            if failures:
                raise CommandError("instruction budget exceeded: " + "; ".join(failures))
