"""`python manage.py jobs`: parse the arguments, then hand over to `jobs.cli`."""

from __future__ import annotations

import os
import sys
from argparse import SUPPRESS, ArgumentParser, RawDescriptionHelpFormatter, _SubParsersAction
from typing import Any

from django.core.management.base import (
    BaseCommand,
    CommandError,
    CommandParser,
    DjangoHelpFormatter,
)
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError

from jobs import cli, log
from jobs.cli import arguments as cli_arguments
from jobs.cli import controls as cli_controls
from jobs.cli import schedules as cli_schedules
from jobs.cli import show as cli_show
from jobs.cli import stats as cli_stats
from jobs.cli.text import terminal_safe
from jobs.drivers import missing_driver

EXIT_STATUS = """\
exit status:
  0  everything asked for was done
  1  some of it was not: a job skipped (the reason is printed), an enqueue
     refused because a live job holds KIND:KEY, or an error such as an
     invalid job or no such id
  2  the arguments were refused (unknown subcommand, an id that is not a
     UUID or 8 or more of its first hex digits, an id prefix that several
     jobs' ids begin, a payload that is not a JSON object, a number out of
     its range, ...)
"""


ID_HELP = (
    "A job's id, or its first 8 or more hex digits (hyphens ignored) if no other job's "
    "id begins with them."
)


class HelpFormatter(DjangoHelpFormatter, RawDescriptionHelpFormatter):
    """Django's order (the command's own options first), keeping the epilog's layout."""


class Command(BaseCommand):
    help = (
        "Browse and operate the job queue: list, show, retry, cancel, run-now, enqueue, "
        "pause, resume, limit, schedules, stats."
    )
    # Django's checks query the database before `handle` runs; an operator
    # whose database is down should read one sentence saying so, not the
    # checks' traceback. `manage.py check` runs them.
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = EXIT_STATUS
        parser.formatter_class = HelpFormatter
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:
        verbs = parser.add_subparsers(dest="verb", metavar="SUBCOMMAND", required=True)

        _list_arguments(_verb(verbs, "list", "List jobs, newest first, one line each."))

        _show_arguments(
            _verb(
                verbs,
                "show",
                "Every field of one job, the payload as JSON, last_error in full, who holds it, "
                "and its attempt history (newest first, tracebacks in full).",
            )
        )

        retry = _verb(
            verbs,
            "retry",
            "Queue failed or cancelled jobs again, due now, with a fresh attempt budget. "
            "Exits 1 if any job was skipped.",
        )
        retry.add_argument("ids", type=cli_arguments.job_id, nargs="+", metavar="ID", help=ID_HELP)

        cancel = _verb(
            verbs,
            "cancel",
            "Retire queued or running jobs as cancelled (each handler's abandon runs once). "
            "Exits 1 if any job was skipped.",
        )
        cancel.add_argument("ids", type=cli_arguments.job_id, nargs="+", metavar="ID", help=ID_HELP)
        _by_argument(cancel, "Who cancelled, kept in last_error")

        run_now = _verb(
            verbs,
            "run-now",
            "Make queued jobs due now, or a schedule's queued occurrence. "
            "Exits 1 if any job was skipped.",
        )
        which = run_now.add_mutually_exclusive_group(required=True)
        which.add_argument(
            "ids", type=cli_arguments.job_id, nargs="*", default=[], metavar="ID", help=ID_HELP
        )
        which.add_argument(
            "--schedule",
            metavar="NAME",
            help="The schedule whose live occurrence to run now; the next is due at the "
            "fire time it stood for.",
        )

        _enqueue_arguments(
            _verb(
                verbs,
                "enqueue",
                "Queue a job. Exits 1, writing nothing, if a live job already holds KIND:KEY.",
            )
        )

        for name, help in (
            (
                "pause",
                "Pause a queue or a kind: runners start no new attempt of it from "
                "their next claim; running attempts finish, queued jobs wait, enqueue still works.",
            ),
            ("resume", "Resume a paused queue or kind."),
        ):
            control = _verb(verbs, name, help)
            target = control.add_mutually_exclusive_group(required=True)
            target.add_argument("--queue", type=cli_arguments.queue_name, help="A queue's name.")
            target.add_argument("--kind", type=cli_arguments.kind, help="A kind.")
            _by_argument(control)

        limit = _verb(
            verbs,
            "limit",
            "Set a kind's concurrency limit across every runner, in place of its handler's "
            "(0 holds its jobs), from each runner's next claim; --clear gives it back.",
        )
        limit.add_argument("--kind", type=cli_arguments.kind, required=True, help="A kind.")
        value = limit.add_mutually_exclusive_group(required=True)
        value.add_argument(
            "limit",
            type=cli_arguments.concurrency_limit,
            nargs="?",
            metavar="N",
            help="At most N attempts of the kind at once.",
        )
        value.add_argument(
            "--clear", action="store_true", help="Use the handler's concurrency_limit again."
        )
        _by_argument(limit)

        _schedules_arguments(
            _verb(
                verbs,
                "schedules",
                "List the schedules: expression, in words, zone, next and last fire, "
                "enabled, live occurrence; or disable or enable one.",
            )
        )

        stats = _verb(
            verbs,
            "stats",
            "The dashboard's numbers: counts (running split into healthy and stuck), lag, "
            "ready jobs no live runner handles, recent settles (per kind), runners.",
        )
        stats.add_argument(
            "--json", action="store_true", help="Print the numbers as JSON, for scripts."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        problem = missing_driver(options["database"])
        if problem:
            raise CommandError(problem)
        try:
            status = self._dispatch(options)
        except (DatabaseError, InterfaceError) as error:
            raise CommandError(f"the database did not answer: {log.first_line(error)}") from error
        except BrokenPipeError:
            # `jobs list | head`: the reader has gone, which is no error of
            # ours. Point stdout at /dev/null so the interpreter's own flush at
            # exit does not fail a second time.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        if status:
            sys.exit(status)

    def _dispatch(self, options: dict[str, Any]) -> int:
        using, verb = options["database"], options["verb"]

        def write(text: str) -> None:
            # One line per write, whatever a field held: a newline in a key
            # must not print a line that reads as another job's row.
            self.stdout.write(terminal_safe(text))

        if verb == "list":
            status = cli.list_jobs(
                write,
                states=options["state"],
                kinds=options["kind"],
                queues=options["queue"],
                has_error=options["has_error"],
                lease_expired=options["lease_expired"],
                limit=options["limit"],
                using=using,
            )
        elif verb == "show":
            status = cli_show.show_job(write, options["id"], as_json=options["json"], using=using)
        elif verb == "retry":
            status = cli.retry_jobs(write, options["ids"], using=using)
        elif verb == "cancel":
            by = options["by"] or cli.default_by()
            status = cli.cancel_jobs(write, options["ids"], by=by, using=using)
        elif verb == "run-now" and options["schedule"] is not None:
            status = cli_schedules.run_now(write, options["schedule"], using=using)
        elif verb == "run-now":
            status = cli.run_now_jobs(write, options["ids"], using=using)
        elif verb == "enqueue":
            status = cli.enqueue_job(
                write,
                options["kind"],
                options["key"],
                payload=options["payload"],
                delay=options["delay"],
                max_attempts=options["max_attempts"],
                using=using,
            )
        elif verb in ("pause", "resume"):
            scope = "queue" if options["queue"] else "kind"
            status = cli_controls.pause(
                write,
                scope,
                options[scope],
                paused=verb == "pause",
                by=options["by"] or cli.default_by(),
                using=using,
            )
        elif verb == "limit":
            status = cli_controls.limit(
                write,
                options["kind"],
                None if options["clear"] else options["limit"],
                by=options["by"] or cli.default_by(),
                using=using,
            )
        elif verb == "schedules" and options["switch"] is not None:
            status = cli_schedules.set_enabled(
                write,
                options["name"],
                enabled=options["switch"] == "enable",
                by=options["by"] or cli.default_by(),
                using=using,
            )
        elif verb == "schedules":
            status = cli_schedules.list_schedules(write, as_json=options["json"], using=using)
        else:
            status = cli_stats.print_stats(write, as_json=options["json"], using=using)
        return status


def _by_argument(parser: ArgumentParser, what: str = "Who did it, logged and kept") -> None:
    parser.add_argument("--by", default=None, help=f"{what} (default cli:<your user name>).")


def _verb(verbs: _SubParsersAction[ArgumentParser], name: str, help: str) -> ArgumentParser:
    """A subcommand, with the exit statuses in its help and the `--database` every verb takes."""
    sub: ArgumentParser = verbs.add_parser(name, help=help, description=help, epilog=EXIT_STATUS)
    sub.formatter_class = HelpFormatter
    sub.add_argument(
        "--database",
        type=cli_arguments.database_alias,
        default=DEFAULT_DB_ALIAS,
        help="The database alias to work on.",
    )
    return sub


def _schedules_arguments(schedules: ArgumentParser) -> None:
    """`schedules` lists (`--json` for scripts); `schedules disable|enable NAME` switches one."""
    schedules.add_argument(
        "--json", action="store_true", help="Print the schedules as JSON, for scripts."
    )
    switches = schedules.add_subparsers(dest="switch", metavar="disable|enable")
    for name, help in (
        (
            "disable",
            "Disable a schedule: from each runner's next claim its occurrences are skipped "
            "to the next fire time. Exits 1, writing nothing, if no schedule has that name.",
        ),
        (
            "enable",
            "Enable a schedule again: it resumes at its next fire time, with no catch-up "
            "runs. Exits 1, writing nothing, if no schedule has that name.",
        ),
    ):
        switch = switches.add_parser(name, help=help, description=help, epilog=EXIT_STATUS)
        switch.formatter_class = HelpFormatter
        switch.add_argument("name", metavar="NAME", help="The schedule's name.")
        _by_argument(switch)
        # Given after NAME; left unset otherwise, so as not to undo one given before it.
        switch.add_argument(
            "--database",
            type=cli_arguments.database_alias,
            default=SUPPRESS,
            help="The database alias to work on.",
        )


def _list_arguments(listing: ArgumentParser) -> None:
    """`list`'s filters, the admin list's, and its limit."""
    listing.add_argument(
        "--state",
        action="append",
        choices=cli.STATES,
        default=[],
        help="Only jobs in this state (repeatable).",
    )
    listing.add_argument(
        "--kind", action="append", default=[], help="Only jobs of this kind (repeatable)."
    )
    listing.add_argument(
        "--queue", action="append", default=[], help="Only jobs of this queue (repeatable)."
    )
    listing.add_argument(
        "--has-error", action="store_true", help="Only jobs whose last_error is not empty."
    )
    listing.add_argument(
        "--lease-expired",
        action="store_true",
        help="Only running jobs whose lease has expired (their runner is likely gone).",
    )
    low, high = cli_arguments.LIMIT_RANGE
    listing.add_argument(
        "--limit",
        type=cli_arguments.limit,
        default=cli.DEFAULT_LIMIT,
        help=f"Show at most this many, {low} to {high:,} (default {cli.DEFAULT_LIMIT}).",
    )


def _show_arguments(show: ArgumentParser) -> None:
    """`show`'s id, and JSON for scripts."""
    show.add_argument("id", type=cli_arguments.job_id, metavar="ID", help=ID_HELP)
    show.add_argument(
        "--json",
        action="store_true",
        help="Print the job as JSON, for scripts: every field, errors as its entries.",
    )


def _enqueue_arguments(enqueue: ArgumentParser) -> None:
    """`enqueue`'s kind and key, and what a `JobSpec` may add to them."""
    low, high = cli_arguments.DELAY_RANGE
    enqueue.add_argument("kind", metavar="KIND")
    enqueue.add_argument("key", metavar="KEY")
    enqueue.add_argument(
        "--payload", type=cli_arguments.payload, default=None, help="A JSON object (default {})."
    )
    enqueue.add_argument(
        "--delay",
        type=cli_arguments.delay,
        default=None,
        help=f"Run no sooner than this many seconds ({low} to {high:,}, ten years).",
    )
    low, high = cli_arguments.MAX_ATTEMPTS_RANGE
    enqueue.add_argument(
        "--max-attempts",
        type=cli_arguments.max_attempts,
        default=None,
        help=f"The attempt budget for this job, {low} to {high:,} "
        "(default: the configured max_attempts).",
    )
