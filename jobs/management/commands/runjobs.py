"""`python manage.py runjobs`: parse the arguments, then hand over to `jobs.runner.process`
(or, with `--processes` above 1, to `jobs.runner.supervisor`)."""

from __future__ import annotations

import math
import sys
from argparse import ArgumentParser, ArgumentTypeError
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS

from jobs import log
from jobs.cli.arguments import database_alias
from jobs.drivers import missing_driver
from jobs.live_config import describe
from jobs.metrics.exposition import DEFAULT_HOST, Address, MetricsUnavailable
from jobs.registry import registry
from jobs.runner.process import serve
from jobs.runner.supervisor import MAX_PROCESSES, supervise
from jobs.schedules import plan
from jobs.spec import queue_name_problem


def _seconds(text: str) -> float:
    """A finite, non-negative number of seconds (argparse reports the error)."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"takes a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ArgumentTypeError(f"must be a finite number of seconds, at least 0, not {text}")
    return value


#: More lanes than this only add threads contending for the GIL.
MAX_LANES = 8


def _from_one_to(highest: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to `highest` (argparse reports the error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ArgumentTypeError(f"takes a whole number, not {text!r}") from None
        if not 1 <= value <= highest:
            raise ArgumentTypeError(f"must be from 1 to {highest}, not {value}")
        return value

    return parse


def _port(text: str) -> int:
    """A TCP port, 1 to 65535 (argparse reports the error)."""
    try:
        value = int(text)
    except ValueError:
        raise ArgumentTypeError(f"takes a port number, not {text!r}") from None
    if not 1 <= value <= 65535:
        raise ArgumentTypeError(f"must be a port from 1 to 65535, not {value}")
    return value


#: The most attempts `--max-jobs-per-process` allows (a process that never recycles).
MAX_JOBS_PER_PROCESS = 100_000_000
#: The largest `--max-memory-per-process`, in MB: 1 TiB.
MAX_MEMORY_PER_PROCESS = 1_048_576

#: The largest `--queue NAME=N` cap: far past any `max_concurrent`.
MAX_QUEUE_CAP = 10_000


def _queue(text: str) -> tuple[str, int | None]:
    """A queue name as `JobSpec` accepts it, with its cap when given as NAME=N
    (argparse reports the error)."""
    name, _, cap_text = text.partition("=")
    if problem := queue_name_problem(name):
        raise ArgumentTypeError(problem)
    if not _:
        return name, None
    try:
        cap = int(cap_text)
    except ValueError:
        cap = 0
    if not 1 <= cap <= MAX_QUEUE_CAP:
        raise ArgumentTypeError(
            f"{text!r}: the cap after {name}= must be a whole number of slots from 1 to "
            f"{MAX_QUEUE_CAP:,}"
        )
    return name, cap


class Command(BaseCommand):
    help = "Run the job queue: claim ready jobs and run them until stopped."
    # Django's system checks ask the database server for its version (the
    # generated `live` column's check does), and a runner started before its
    # database must wait for it, not exit with a traceback: the runner's own
    # start-up retries instead. Run `manage.py check` when deploying.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        self.parser = parser
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Drain every job that is ready now, then exit 0 (for cron, CI and tests).",
        )
        parser.add_argument(
            "--grace",
            type=_seconds,
            default=30.0,
            help="Seconds running attempts get to finish after SIGTERM/SIGINT (default 30).",
        )
        parser.add_argument(
            "--lanes",
            type=_from_one_to(MAX_LANES),
            default=1,
            help=(
                "Claiming loops in this process, each with its own database connection "
                "and an equal share of max_concurrent (default 1). Two let one loop's "
                "statement run while the other's attempts do: worth it at 32 slots or more."
            ),
        )
        parser.add_argument(
            "--queue",
            dest="queues",
            action="append",
            type=_queue,
            metavar="NAME[=N]",
            help=(
                "Claim only jobs of this queue (repeatable); NAME=N gives the queue at "
                "most N of this runner's slots. Without it the runner serves every queue."
            ),
        )
        parser.add_argument(
            "--processes",
            type=_from_one_to(MAX_PROCESSES),
            default=1,
            help=(
                f"Runner processes to run (1 to {MAX_PROCESSES}, default 1), each with the "
                "options above, under this one as their supervisor: it restarts one that "
                "dies and relays SIGTERM, SIGINT and SIGHUP to them all."
            ),
        )
        parser.add_argument(
            "--max-jobs-per-process",
            type=_from_one_to(MAX_JOBS_PER_PROCESS),
            metavar="N",
            help=(
                "Recycle the process once N of its attempts have ended (like Celery's "
                "max_tasks_per_child): it stops claiming, finishes what it holds within "
                "--grace and exits 5, which --processes restarts at once (under a process "
                "manager, restart it on a non-zero exit). Off by default."
            ),
        )
        parser.add_argument(
            "--max-memory-per-process",
            type=_from_one_to(MAX_MEMORY_PER_PROCESS),
            metavar="MB",
            help=(
                "Recycle the process, as --max-jobs-per-process does, when its resident "
                "memory is over MB megabytes after an attempt (like Celery's "
                "max_memory_per_child). Off by default."
            ),
        )
        parser.add_argument(
            "--metrics-port",
            type=_port,
            metavar="PORT",
            help=(
                "Serve Prometheus metrics over HTTP on this port (off by default): this "
                "runner's counters and gauges, with --processes every child's summed, "
                "and the table's gauges read at each scrape."
            ),
        )
        parser.add_argument(
            "--metrics-host",
            default=DEFAULT_HOST,
            metavar="HOST",
            help=f"The address the metrics endpoint listens on (default {DEFAULT_HOST}).",
        )
        parser.add_argument(
            "--database",
            type=database_alias,
            default=DEFAULT_DB_ALIAS,
            help="The database alias to work on.",
        )
        parser.add_argument(
            "--print-config",
            action="store_true",
            help="Print the effective config and where each value comes from, then exit.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["processes"] > 1 and options["burst"]:
            # A burst drains what is ready and exits, which a supervisor would
            # take for a death and restart; more claiming loops are `--lanes`.
            self.parser.error(
                "--burst drains in one process and exits; it does not combine with "
                "--processes (use --lanes for more claiming loops)"
            )
        problem = missing_driver(options["database"])
        if problem:
            raise CommandError(problem)
        if options["print_config"]:  # with --processes too: each child would read the same
            for line in describe(options["database"]):
                self.stdout.write(line)
            return
        problems = plan.problems(registry)
        if problems:
            raise CommandError("; ".join(problems))
        log.to_terminal_unless_configured()
        metrics = None
        if options["metrics_port"] is not None:
            metrics = Address(options["metrics_host"], options["metrics_port"])
        try:
            status = self._run(options, metrics)
        except MetricsUnavailable as error:
            raise CommandError(str(error)) from None
        if status:
            sys.exit(status)

    def _run(self, options: dict[str, Any], metrics: Address | None) -> int:
        if options["processes"] > 1:
            return supervise(
                child_arguments(options),
                options["processes"],
                options["grace"],
                metrics=metrics,
                using=options["database"],
            )
        return serve(
            using=options["database"],
            burst=options["burst"],
            grace=options["grace"],
            lanes=options["lanes"],
            queues=[name for name, _ in options["queues"]] if options["queues"] else None,
            queue_caps={name: cap for name, cap in options["queues"] or () if cap is not None},
            metrics=metrics,
            max_jobs=options["max_jobs_per_process"],
            max_memory_mb=options["max_memory_per_process"],
        )


def child_arguments(options: dict[str, Any]) -> list[str]:
    """The options a supervisor's child gets: this command's own, `--processes` left out."""
    arguments = [
        f"--grace={options['grace']!r}",
        f"--lanes={options['lanes']}",
        f"--database={options['database']}",
        f"--verbosity={options['verbosity']}",
    ]
    for option in ("max_jobs_per_process", "max_memory_per_process"):
        if options.get(option) is not None:
            arguments.append(f"--{option.replace('_', '-')}={options[option]}")
    for name, cap in options["queues"] or ():
        arguments.append(f"--queue={name}" if cap is None else f"--queue={name}={cap}")
    for option in ("settings", "pythonpath"):
        if options.get(option):
            arguments.append(f"--{option}={options[option]}")
    for flag in ("traceback", "no_color", "force_color"):
        if options.get(flag):
            arguments.append("--" + flag.replace("_", "-"))
    return arguments
