"""`python manage.py jobs`: the parser, built from the verb modules of `jobs.cli`;
the handler each verb sets as its parser's default does the rest."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from jobs import cli, log
from jobs.cli.dispatch import run
from jobs.cli.verb import EXIT_STATUS, HelpFormatter


class Command(BaseCommand):
    help = (
        "Browse and operate the job queue: list, show, retry, cancel, run-now, dead, redrive, "
        "enqueue, "
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
        for verb in cli.VERBS:
            verb.add_parser(verbs)

    def handle(self, *args: Any, **options: Any) -> None:
        # An operator's change (a pause, a limit, a cancel) is logged naming
        # who made it; without a LOGGING setting Python would drop those lines.
        log.to_terminal_unless_configured()
        if status := run(options, self.stdout):
            sys.exit(status)
