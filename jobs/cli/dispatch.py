"""From the parsed arguments to the verb's handler, with what every verb shares
around it: each line made terminal-safe, and the failures no verb words itself
(a missing driver, a database that does not answer, a reader that has gone)."""

from __future__ import annotations

import os
import sys

from django.core.management.base import CommandError, OutputWrapper
from django.db import DatabaseError, InterfaceError

from jobs import log
from jobs.cli.text import terminal_safe
from jobs.cli.verb import NOT_ALL_DONE, Options
from jobs.drivers import missing_driver


def run(options: Options, stdout: OutputWrapper) -> int:
    """Run the handler the parsed `options` carry (`jobs.cli.verb.add`), writing to
    `stdout`; returns its exit status."""
    problem = missing_driver(options["database"])
    if problem:
        raise CommandError(problem)

    def write(text: str) -> None:
        # One line per write, whatever a field held: a newline in a key
        # must not print a line that reads as another job's row.
        stdout.write(terminal_safe(text))

    try:
        status: int = options["handler"](write, options)
    except (DatabaseError, InterfaceError) as error:
        raise CommandError(f"the database did not answer: {log.first_line(error)}") from error
    except BrokenPipeError:
        # `jobs list | head`: the reader has gone, which is no error of
        # ours. Point stdout at /dev/null so the interpreter's own flush at
        # exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return NOT_ALL_DONE
    return status
