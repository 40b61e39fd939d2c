"""`manage.py jobs stats`: the dashboard's numbers as text, or as JSON for scripts.

Its own module because the numbers have grown past a table of counts: the
running jobs split into those a live runner holds and those nobody is
working on (`jobs.holding`), the lag over every due job whatever holds it,
with the queued jobs broken out by what holds them (`jobs.waiting`: a
runner, a limit, a pause, a schedule, their run_at), the (kind, queue) pairs
no live runner serves, and each kind's settles of the last hour. The
figures are `jobs.stats.collect`'s; this module only words them.
"""

from __future__ import annotations

import json

from django.db import DEFAULT_DB_ALIAS

from jobs.cli import verb
from jobs.cli.text import Write, table
from jobs.cli.verb import OK, Options, Verbs
from jobs.holding import LEASE_EXPIRED, RUNNER_GONE
from jobs.models import LIVE_STATES, State
from jobs.presentation import duration, relative
from jobs.stats import Stats, collect
from jobs.waiting import NOUNS, REASONS, RUN_AT

#: stats's help, as `--help` shows it.
HELP = (
    "The dashboard's numbers: counts (running split into healthy and stuck), lag, "
    "what holds the queued jobs (runner, limit, pause, schedule, run_at), "
    "recent settles (per kind), runners."
)


def add_parser(verbs: Verbs) -> None:
    stats = verb.add(verbs, "stats", HELP, handle)
    verb.json_argument(stats, "the numbers")


def handle(write: Write, options: Options) -> int:
    """`stats`' options, to `print_stats`."""
    return print_stats(write, as_json=options["json"], using=options["database"])


def print_stats(write: Write, *, as_json: bool = False, using: str = DEFAULT_DB_ALIAS) -> int:
    """The dashboard's numbers as text, or `Stats.as_json` for scripts."""
    stats = collect(using=using)
    if as_json:
        # One write per line: `write` keeps each on one line. JSON escapes
        # a newline within a string, so each "\n" left ends a line.
        for line in json.dumps(stats.as_json(), indent=2, sort_keys=True).split("\n"):
            write(line)
        return OK
    for line in stats_lines(stats):
        write(line)
    return OK


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{state} {n}" for state, n in counts.items())


def _jobs(n: int) -> str:
    return "1 job" if n == 1 else f"{n} jobs"


def stats_lines(stats: Stats) -> list[str]:
    """The dashboard, as lines of text."""
    lines = [f"Jobs at {stats.now.isoformat(timespec='seconds')}"]
    lines += state_lines(stats)
    lines += wait_lines(stats)
    lines.append(f"Settled in the last 5 minutes: {_counts(stats.last_5_minutes)}")
    lines.append(f"Settled in the last hour:      {_counts(stats.last_hour)}")
    lines += kind_lines(stats)
    lines += runner_lines(stats)
    lines += control_lines(stats)
    if stats.unserved:
        pairs = ", ".join(f"{kind} in queue {queue}" for kind, queue in stats.unserved)
        lines.append(f"Live jobs no live runner serves: {pairs}")
    return lines


def control_lines(stats: Stats) -> list[str]:
    """What the operator has paused or limited, by whom since when."""
    lines = []
    for control in stats.controls:
        said = ["paused"] if control["paused"] else []
        if control["concurrency_limit"] is not None:
            said.append(f"concurrency limit {control['concurrency_limit']}")
        since = control["since"].isoformat(timespec="seconds")
        lines.append(
            f"{control['scope'].capitalize()} {control['name']}: {', '.join(said)} "
            f"(by {control['by']} since {since})"
        )
    return lines


def state_lines(stats: Stats) -> list[str]:
    """A count per state; the running split into healthy and stuck when any is stuck."""
    width = max(len(state) for state in stats.by_state)
    number = max(len(str(n)) for n in stats.by_state.values())
    lines = []
    for state, n in stats.by_state.items():
        note = " (estimated)" if stats.estimated and state not in LIVE_STATES else ""
        if state == State.RUNNING and stats.stuck:
            note = (
                f" ({stats.healthy_running} healthy, {stats.stuck} stuck: "
                f"{RUNNER_GONE} or {LEASE_EXPIRED})"
            )
        lines.append(f"  {state.ljust(width)}  {str(n).rjust(number)}{note}")
    return lines


def wait_lines(stats: Stats) -> list[str]:
    """The lag over every due job, and the queued jobs by what holds them."""
    lines = [
        f"Lag: {duration(stats.lag_seconds)} "
        "(how long the oldest due job has waited past its run_at, whatever holds it)"
        if stats.lag_seconds
        else "Lag: none (no due job is waiting)"
    ]
    held = [reason for reason in REASONS if stats.waiting.get(reason, {}).get("jobs")]
    if held:
        lines.append("Queued jobs, by what they wait for:")
        rows = []
        for reason in held:
            counts = stats.waiting[reason]
            oldest = counts["oldest_seconds"]
            rows.append(
                [
                    f"{reason}:",
                    _jobs(int(counts["jobs"])),
                    f"({NOUNS[reason]})",
                    "" if reason == RUN_AT or not oldest else f"oldest due {duration(oldest)} ago",
                ]
            )
        lines += [f"  {line}".rstrip() for line in table(rows)]
    return lines


def kind_lines(stats: Stats) -> list[str]:
    """Live jobs, the last hour's done and failed, and the slowest kinds, per kind."""
    lines = []
    if stats.live_by_kind:
        lines.append("Live jobs by kind:")
        rows = [[kind, _counts(counts)] for kind, counts in sorted(stats.live_by_kind.items())]
        lines += [f"  {line}" for line in table(rows)]
    if stats.kinds_last_hour:
        lines.append("Done and failed in the last hour, by kind:")
        rows = [
            [kind, f"done {counts.get('done', 0)}", f"failed {counts.get('failed', 0)}"]
            for kind, counts in sorted(stats.kinds_last_hour.items())
        ]
        lines += [f"  {line}" for line in table(rows)]
    if stats.slowest_kinds:
        lines.append("Slowest kinds (mean attempt over the last hour):")
        rows = [
            [k["kind"], f"{k['mean_seconds']:.3f} s", f"over {k['count']} jobs"]
            for k in stats.slowest_kinds
        ]
        lines += [f"  {line}" for line in table(rows)]
    return lines


def runner_lines(stats: Stats) -> list[str]:
    """Each runner by its name (as `Job.claimed_by` holds it), its load, heartbeat and kinds."""
    if not stats.runners:
        return ["Runners: none (no `runjobs` process has reported itself)"]
    rows = [
        [
            r.name,
            r.version,
            f"running {r.running}/{r.max_concurrent}",
            f"heartbeat {relative(r.heartbeat_at, stats.now)}",
            ("GONE " if r.gone else "") + f"kinds: {', '.join(r.kinds) or '-'}",
        ]
        for r in stats.runners
    ]
    return ["Runners:", *(f"  {line}" for line in table(rows))]
