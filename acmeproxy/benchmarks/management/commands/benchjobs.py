"""`python manage.py benchjobs`: parse the arguments, run `acmeproxy.benchmarks.bench`, print."""

from __future__ import annotations

import json
import os
import platform
import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.utils import timezone

from acmeproxy.benchmarks import bench
from jobs import log

PARTS = ("drain", "enqueue", "latency", "ceiling", "scale")


class Command(BaseCommand):
    help = "Measure the queue on the database DATABASE_URL names (a scratch one, please)."
    # Django's checks would reach the database before `handle` can report a
    # missing one clearly; the migrate below finds the same faults.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--jobs", type=int, default=20_000, help="Jobs in the drain (20000).")
        parser.add_argument(
            "--enqueues", type=int, default=5_000, help="Enqueues in the enqueue part (5000)."
        )
        parser.add_argument(
            "--only", choices=PARTS, action="append", help="Run only these parts (repeatable)."
        )
        parser.add_argument(
            "--settled", type=int, default=1_000_000, help="History rows for scale."
        )
        parser.add_argument(
            "--repeat",
            type=int,
            default=3,
            help="Runs of drain and enqueue; the median run is shown (3).",
        )
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        parts = options["only"] or PARTS
        try:
            # A scratch database is usually a fresh one: bring its tables up first.
            call_command("migrate", interactive=False, verbosity=0)
        except DatabaseError as error:
            raise CommandError(
                f"cannot use the database DATABASE_URL names: {log.first_line(error)}"
            ) from error
        results: list[bench.Result] = []
        repeat, jobs = options["repeat"], options["jobs"]
        if repeat < 1:
            raise CommandError("--repeat must be at least 1")
        if "drain" in parts:
            results += bench.median_of(repeat, lambda: [bench.drain(jobs, "default config")])
            results += bench.median_of(repeat, lambda: [bench.drain(jobs, "tuned", **bench.TUNED)])
            results += bench.median_of(
                repeat,
                lambda: [
                    bench.drain(
                        jobs,
                        f"tuned, {bench.TUNED_LANES} lanes",
                        lanes=bench.TUNED_LANES,
                        **bench.TUNED,
                    )
                ],
            )
        if "enqueue" in parts:
            count = options["enqueues"]
            results += bench.median_of(
                repeat, lambda: bench.enqueue_rates(count) + bench.raw_enqueue_rates(count)
            )
        if "latency" in parts:
            results.append(bench.latency(200, 0.02))
        if "ceiling" in parts:
            results.append(bench.ceiling(options["jobs"]))
            if connection.vendor == "postgresql":
                results.append(bench.ceiling_per_pass(options["jobs"]))
            bench.drains_against_ceilings(results)
        if "scale" in parts:
            results.append(bench.scale(200, options["settled"], options["settled"] // 10))
        header = {
            "date": timezone.now().isoformat(timespec="seconds"),
            "database": bench.describe_database(),
            "python": sys.version.split()[0],
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        }
        if options["json"]:
            report = {**header, "results": [r.__dict__ for r in results]}
            self.stdout.write(json.dumps(report, indent=2, default=str))
            return
        for key, value in header.items():
            self.stdout.write(f"{key}: {value}")
        for result in results:
            shown = ", ".join(f"{k}={v}" for k, v in result.numbers.items())
            self.stdout.write(f"{result.part:<48} {shown}")
