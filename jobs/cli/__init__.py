"""What `manage.py jobs` does: the operator's verbs at a shell, for when the admin
is not at hand (an incident over SSH, a script, a cron check).

One module per verb (`pause` holds `resume` too, which takes the same
arguments), each declaring its subcommand (`add_parser`) and the handler the
parsed arguments carry to it (`jobs.cli.verb.add`); `VERBS` lists them in the
order `--help` shows them, and the command module only builds its parser from
them (`jobs.cli.dispatch` runs the handler). The argument types
(`jobs.cli.arguments`) turn text into values or refuse it with a sentence
(argparse then exits 2, or raises `CommandError` under `call_command`); each
verb's function takes parsed values and a `write` callable and returns the
exit status, so tests can call it without the command. A line a verb writes
stays one line however many newlines a field held
(`jobs.cli.text.terminal_safe`); an id given as a prefix is resolved in
`jobs.cli.ids`; a kind or queue nothing names is warned about (or refused
with `--strict`) in `jobs.cli.names`. Changes go through the same doors as the admin
(`jobs.operations`, `jobs.bulk` and `jobs.dead_letters`, `jobs.controls`,
`jobs.queue.enqueue`, `jobs.stats.collect`, `jobs.schedules.operator`,
`jobs.workflows.operator`), so the command holds no rules about identity,
attempts or fencing of its own; and it
says things in the admin's words (`jobs.presentation`), at the length a shell
has room for.

Exit status: 0 when everything asked for was done; 1 when some of it was not
(a job skipped, an enqueue refused as a duplicate) or the command failed
(`CommandError`); 2 for arguments the parser refused.
"""

from __future__ import annotations

from jobs.cli import (
    cancel,
    dead,
    enqueue,
    limit,
    listing,
    pause,
    redrive,
    retry,
    run_now,
    schedules,
    show,
    stats,
    workflow,
)
from jobs.cli.cancel import cancel_jobs
from jobs.cli.enqueue import enqueue_job
from jobs.cli.ids import MATCHES_SHOWN, one_job, resolve
from jobs.cli.listing import DEFAULT_LIMIT, STATES, list_jobs, when
from jobs.cli.retry import retry_jobs
from jobs.cli.run_now import run_now_jobs
from jobs.cli.verb import NOT_ALL_DONE, OK, Module, default_by

#: The verb modules, in the order `manage.py jobs --help` lists their subcommands.
VERBS: tuple[Module, ...] = (
    listing,
    show,
    retry,
    cancel,
    run_now,
    dead,
    redrive,
    enqueue,
    pause,
    limit,
    schedules,
    stats,
    workflow,
)

__all__ = [
    "DEFAULT_LIMIT",
    "MATCHES_SHOWN",
    "NOT_ALL_DONE",
    "OK",
    "STATES",
    "VERBS",
    "cancel_jobs",
    "default_by",
    "enqueue_job",
    "list_jobs",
    "one_job",
    "resolve",
    "retry_jobs",
    "run_now_jobs",
    "when",
]
