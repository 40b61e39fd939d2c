"""What every verb of `manage.py jobs` shares with the others: how it adds its
subcommand, the options every one takes, and the exit statuses it returns.

A verb module declares its subcommand with `add` (the exit statuses in its
help, `--database`, and its handler as the parser's default), so that the
command builds its parser from the verb modules and runs whichever handler the
parsed arguments carry, with no list of verbs of its own.
"""

from __future__ import annotations

import getpass
from argparse import ArgumentParser, RawDescriptionHelpFormatter, _SubParsersAction
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from django.core.management.base import DjangoHelpFormatter
from django.db import DEFAULT_DB_ALIAS

from jobs.cli.arguments import database_alias
from jobs.cli.text import Write

#: Everything asked for was done.
OK = 0
#: Some of it was not: a job skipped, an enqueue refused as a duplicate.
NOT_ALL_DONE = 1

EXIT_STATUS = """\
exit status:
  0  everything asked for was done
  1  some of it was not: a job skipped (the reason is printed), an enqueue
     refused because a live job holds KIND:KEY, or an error such as an
     invalid job, no such id, or a kind or queue nothing names refused
     by --strict
  2  the arguments were refused (unknown subcommand, an id that is not a
     UUID or 8 or more of its first hex digits, an id prefix that several
     jobs' ids begin, a payload that is not a JSON object, a kind or queue
     name no job could have, a number out of its range, ...)
"""

ID_HELP = (
    "A job's id, or its first 8 or more hex digits (hyphens ignored) if no other job's "
    "id begins with them."
)

#: The parsed arguments, as the command's `handle` receives them.
Options = Mapping[str, Any]
#: A verb's handler: writes its lines and returns the exit status.
Handler = Callable[[Write, Options], int]
#: What `add_subparsers` returns, to which each verb adds its subcommand.
type Verbs = _SubParsersAction[ArgumentParser]


class Module(Protocol):
    """A verb module, as `jobs.cli.VERBS` lists it."""

    def add_parser(self, verbs: Verbs) -> None:
        """Add the verb's subcommands, each carrying its handler."""


class HelpFormatter(DjangoHelpFormatter, RawDescriptionHelpFormatter):
    """Django's order (the command's own options first), keeping the epilog's layout."""


def add(verbs: Verbs, name: str, help: str, handler: Handler) -> ArgumentParser:
    """A subcommand that runs `handler`, with the exit statuses in its help and the
    `--database` every verb takes."""
    sub = subcommand(verbs, name, help)
    sub.set_defaults(handler=handler)
    sub.add_argument(
        "--database",
        type=database_alias,
        default=DEFAULT_DB_ALIAS,
        help="The database alias to work on.",
    )
    return sub


def subcommand(verbs: Verbs, name: str, help: str) -> ArgumentParser:
    """A subcommand whose help ends with the exit statuses, laid out as written."""
    sub: ArgumentParser = verbs.add_parser(name, help=help, description=help, epilog=EXIT_STATUS)
    sub.formatter_class = HelpFormatter
    return sub


def json_argument(parser: ArgumentParser, thing: str, detail: str = "") -> None:
    """`--json`: print `thing` as JSON instead of text (`detail` says what it holds)."""
    said = f": {detail}" if detail else ""
    parser.add_argument(
        "--json", action="store_true", help=f"Print {thing} as JSON, for scripts{said}."
    )


def by_argument(parser: ArgumentParser, what: str = "Who did it, logged and kept") -> None:
    parser.add_argument("--by", default=None, help=f"{what} (default cli:<your user name>).")


def by(options: Options) -> str:
    """Who a change is by: `--by`, or else the operating-system user at the shell."""
    return options["by"] or default_by()


def default_by() -> str:
    """Who a change is by, when not told: the operating-system user at the shell."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (some containers)
        user = "unknown user"
    return f"cli:{user}"
