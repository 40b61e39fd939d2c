"""Render docs/reliability.md from the fault suite's figures.

    python -m tests.faults.report [FIGURES_JSON] [OUTPUT_MD]

Defaults: tests/artifacts/faults.json (written by `tests/faults` as it runs)
and docs/reliability.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FIGURES = ROOT / "tests" / "artifacts" / "faults.json"
DEFAULT_OUTPUT = ROOT / "docs" / "reliability.md"

#: The order scenarios are shown in, and what each proves.
SCENARIOS = {
    "crash (SIGKILL every second)": (
        "50,000 jobs; a runner SIGKILLed every second for a minute, each replaced at once. "
        "Every job done; a job ran again only where its earlier attempt's process was "
        "SIGKILLed before the settle landed; no healthy attempt ran beside another."
    ),
    "database restart": (
        "50,000 jobs; PostgreSQL restarted four times mid-drain. Runners log each outage, "
        "back off, reconnect (LISTEN too) and finish; settles are tried again until the "
        "server answers, so a job ran again only where its runner logged the settle as "
        "failed or its handler's own write failed in the outage (a retry)."
    ),
    "PostgreSQL crash (slow handlers)": (
        "PostgreSQL stopped in immediate mode mid-drain and started (a crash, the WAL "
        "replayed), with 20 ms attempts in flight: no job lost; every rerun is a Done or a "
        "claim the crash forgot (the runner's passes commit without waiting for the flush), "
        "or a settle the runner logged as failed during the outage. Checked against a "
        "ledger kept outside the database."
    ),
    "PostgreSQL crash (no-op handlers)": (
        "The same crash in a flood of passes (no-op handlers, thousands of commits a "
        "second): no job lost, every rerun explained the same way."
    ),
    "database unreachable at start": (
        "`runjobs` waits with `runner_database_unavailable` instead of a traceback, then drains."
    ),
    "connection starvation at start": (
        "A runner of 8 slots (needs 10 connections) as a role limited to 5: it warns at start "
        "(`runner_connection_budget outcome=short`), runs as many attempts at once as it has "
        "connections for, and loses nothing, runs nothing twice, retires nothing, leaves "
        "nothing running after SIGTERM."
    ),
    "connections taken mid-run": (
        "Another client takes every connection the runner's role has left: each handler "
        "refused a connection ends in its Retry, settled once a connection is free; no row "
        "is left as if its runner had died."
    ),
    "PgBouncer, transaction mode": (
        "PgBouncer 1.18 with one server connection for every client, default settings: "
        "nothing prepared through it, no prepared-statement error, every job once, and no "
        "setting of the runner's left for the next client."
    ),
    "hanging handler": (
        "Cut off at its 1 s lease, settled as a timed-out retry, retired once; other work "
        "drains; a late result is discarded."
    ),
    "poison job": (
        "A handler that kills its process spends one attempt per death and is retired with "
        "`abandon` called exactly once."
    ),
    "slow and raising abandon": (
        "Logged, the runner carries on, the retirement commits exactly once."
    ),
    "abandon past the idle transaction timeout": (
        "The server ends every session idle in a transaction for 1 s (PGOPTIONS); "
        "`abandon`s that sleep 2.5 s, two after a write, are each called once, after their "
        "retirement committed, and each job is retired once at attempt 1 (before, the "
        "retirement rolled back with its killed transaction, and the job was reclaimed and "
        "abandoned again, never settling). A killed `abandon`'s own write is lost and logged. "
        "Calls counted in a file outside the database."
    ),
    "runner killed between retirement and abandon": (
        "Runners SIGKILLed as each retirement commits, before the `abandon` call is claimed: "
        "every call is left owed, none lost, and two runners started together once the 10 s "
        "grace has passed make each exactly once (`abandon` is at most once per retirement)."
    ),
    "bad outcomes": (
        "Handlers that return what no database stores (a NUL, a lone surrogate, a set, "
        "40-deep nesting), reasons that are not text, exceptions whose message has a NUL, "
        "and a Reschedule of -1 h or 0: each is its own job's Failed (or a Retry with its "
        "reason as text), settled at once; no innocent job in the same batch runs twice, "
        "none is left running, no hot loop."
    ),
    "poison jobs under a supervisor": (
        "`runjobs --processes 2` with jobs that `os._exit` or SIGKILL their own process: "
        "a child that had said it was ready is never a failed start, so the supervisor "
        "never gives up; each is replaced within about 2 s; each poison job is retired "
        "after its attempts, saying its process died, with `abandon` once; jobs that "
        "shared a dying process ran again, each explained by that death."
    ),
    "raising recover": "Logged at start-up; the runner drains anyway.",
    "graceful shutdown under load": (
        "SIGTERM with 8 attempts running: all 8 finish and are stored, exit 0 within the grace."
    ),
    "memory (100,000-job drain)": "Resident memory stays within the stated bound.",
    "row lock held past the lease": (
        "Another session holds `SELECT ... FOR UPDATE` on one of eight running rows for longer "
        "than its lease: the renewal skips that row (`job_renewal_skipped`) and renews the "
        "others on the heartbeat's own connection; no job runs twice, none twice at once."
    ),
    "runner clock +60 s": (
        "A runner whose clock is a minute ahead, beside the runner holding eight long jobs: "
        "it tells time by the database's clock (`runner_clock_skew`) and takes none of them."
    ),
    "runner clock -60 s": (
        "A runner whose clock is a minute behind holds eight long jobs: the leases it writes "
        "are on the database's clock, and the runner beside it takes none of them."
    ),
}

COLUMNS = (
    ("load", "Load"),
    ("faults", "Faults injected"),
    ("jobs_lost", "Jobs lost"),
    ("completed_attempts_repeated", "Completed attempts repeated (all explained)"),
    ("concurrent_duplicates", "Healthy attempts run twice at once"),
    ("stuck", "Rows left running"),
    ("abandon_calls_max", "Most abandon calls for one retirement"),
    ("time_to_recover_seconds", "Time to recover (s)"),
)

#: Figures shown under the table, per scenario, beyond the columns.
EXTRA_SKIP = {key for key, _ in COLUMNS} | {"recorded_at", "unexplained_repeats"}


def render(figures: dict[str, dict[str, Any]]) -> str:
    names = [name for name in SCENARIOS if name in figures] + sorted(
        name for name in figures if name not in SCENARIOS
    )
    recorded = sorted(f.get("recorded_at", "") for f in figures.values())
    lines = [
        "# Reliability: the fault suite's figures",
        "",
        "Generated by `python -m tests.faults.report` from `tests/artifacts/faults.json`, "
        "which `tests/faults/` writes as it runs (real `runjobs` processes, real PostgreSQL 15, "
        "on a 2-core machine). Do not edit by hand: run the fault suite, then the report.",
        "",
        f"Last run: {recorded[0] if recorded else '?'} to {recorded[-1] if recorded else '?'}.",
        "",
        "How the books are checked: every execution of a handler is recorded (job, attempt, "
        "process, start, end). A job is *lost* if it did not settle as the scenario expects. "
        "A *completed attempt repeated* is an execution that ran to its end and was followed "
        "by another execution of the same job; each one must be explained by a settle that "
        "never landed: its process was SIGKILLed after it finished, or its runner logged the "
        "settle as failed, timed out or discarded for that job and attempt. The PostgreSQL "
        "crash scenarios keep those records outside the database (a ledger file per "
        "process), and also allow a commit the crash forgot: a Done, or a claim, which "
        "hands the job out again with the same attempt number, made at most a second "
        "before the crash. Unexplained repeats fail the suite, so every figure below is "
        "explained.",
        "",
        "| Scenario | " + " | ".join(title for _, title in COLUMNS) + " | Result |",
        "|---|" + "---|" * len(COLUMNS) + "---|",
    ]
    for name in names:
        row = figures[name]
        cells = [_cell(row.get(key)) for key, _ in COLUMNS]
        ok = (
            row.get("jobs_lost") == 0
            and row.get("unexplained_repeats", 0) == 0
            and row.get("concurrent_duplicates", 0) == 0
            and row.get("stuck", 0) == 0
            and row.get("abandon_calls_max", 0) <= 1
        )
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'pass' if ok else 'FAIL'} |")
    lines += [
        "",
        "Time to recover: crash, from the last kill to the last job done; database restart, "
        "from the restart command to jobs completing again; PostgreSQL crash, from the "
        "crash command to jobs completing again (the replay included); unreachable at start, "
        "from the database starting to the drain's end; hanging handler, abandon and recover, "
        "from the "
        "runners' start to every job settled; poison job, from the first burst to its "
        "retirement; graceful shutdown, from SIGTERM to the process's exit; abandon past "
        "the idle transaction timeout, from the runner's start to every job settled; "
        "runner killed between retirement and abandon, from the first runner's start to "
        "every owed `abandon` made (the 10 s grace included).",
        "",
        "## What is guaranteed, precisely",
        "",
        "- **No job is lost.** Every queued job settles (`done`, `failed` or `cancelled`) "
        "whatever the runners, their handlers or the database do, as long as some runner "
        "serving its queue comes back.",
        "- **Execution is at least once, attempts counted at claim.** A handler may run "
        "again after its process died or its settle never landed; each such run is a new "
        "attempt, counted, so a job's handler runs at most `max_attempts` times (a claim "
        "past the budget retires the job unrun, saying how its attempts ended).",
        "- **A healthy attempt never runs beside another of its job.** Its runner renews "
        "its lease every heartbeat on a connection of its own, skipping (and retrying "
        "next beat) a row another session holds, and tells time by the database's clock, "
        "so neither a row lock nor a skewed clock lets another runner take it. The one "
        "exception is stated: a runner that cannot renew for a whole lease (three "
        "heartbeats: its database unreachable) gives the attempt up (`job_lease_lost`); "
        "its handler is not interrupted, and what it returns is refused if another "
        "attempt holds the row by then.",
        "- **Each settle lands at most once.** Every settle is fenced on its attempt; a "
        "late or stale one writes nothing. A job is settled `done` once, its result "
        "stored once. A settle that meets a transient database error is tried again "
        "for a few seconds; a batch that fails is settled row by row.",
        "- **`abandon` is called at most once per retirement, even across a crash.** The "
        "retirement commits first, with the call marked owed; the call is then claimed "
        "by one conditional update and made outside any lock or transaction of the "
        "retirement. A process that dies before the claim leaves the mark, and a runner "
        "with the handler pays it; one that dies during the call does not make it again "
        "(`job_abandon_started` with no end says so).",
        "- **A handler's own writes are not exactly once with its job yet**: they commit "
        "in their own transactions, so a rerun repeats them unless the handler is "
        "idempotent (keyed by `job.id` or `(kind, key)`).",
        "- **Schedules keep one live occurrence each**; a schedule row edited into "
        "nonsense stops only its successor, and the schedule resumes within a minute of "
        "the row being fixed.",
        "",
        "## Found and fixed by this suite",
        "",
        "- A `runjobs` started while its database was down exited with a traceback (the "
        "config read and the presence row came before the loop's error handling). It now "
        "logs `runner_database_unavailable retry_in_seconds=...` and retries, the wait "
        "doubling from 0.5 s to 5 s (`jobs/runner/producer.py`).",
        "- With DEBUG on (the project's default) every query the runner's loop and workers "
        "ran stayed in Django's per-connection query log, since a runner never ends a "
        "request: a 100,000-job drain grew the process by ~22 MB. The loop and the workers "
        "now clear it (`jobs/runner/pool.py: forget_queries`).",
        "- A session holding a lock on one running row (an operator's cancel whose "
        "`abandon` was slow, any `SELECT ... FOR UPDATE`) blocked the one statement that "
        "renewed all of a runner's leases, on the loop's thread: their leases ran out and "
        "another runner took healthy attempts (7 of 8 ran twice at once). Leases are now "
        "renewed on a heartbeat thread with its own connection, skipping locked rows.",
        "- Every due-time and lease decision used the runner's own clock: a runner 25 s "
        "ahead took all of another's healthy attempts; one 60 s behind wrote leases "
        "already expired. Runners now correct by the database's clock, measured at every "
        "heartbeat (`jobs/clock.py`).",
        "- A handler that killed its process counted as a failed start when the process "
        "died within 10 s, so six poison jobs made `runjobs --processes 2` give up (exit "
        "4) with rows left running. A start now succeeds when the child says it is ready.",
        "- One `Done` result PostgreSQL's jsonb refused (a NUL, a lone surrogate) failed "
        "the whole batch's settle and innocent jobs ran twice; `Retry(None)` and the like "
        "crashed their settle; `Reschedule` of a negative delay looped hot. Outcomes are "
        "now checked before their settle, and a failed batch settles row by row.",
        "- With `idle_in_transaction_session_timeout` set, a slow `abandon` inside the "
        "retirement's transaction had it killed and rolled back, and the job was "
        "reclaimed and abandoned again (11 calls, attempts 11 of 5). The retirement now "
        "commits first and `abandon` runs after, at most once.",
        "",
        "## What each scenario proves, and its other figures",
        "",
    ]
    for name in names:
        row = figures[name]
        lines.append(f"### {name}")
        lines.append("")
        if name in SCENARIOS:
            lines.append(SCENARIOS[name])
            lines.append("")
        for key in sorted(set(row) - EXTRA_SKIP):
            lines.append(f"- {key.replace('_', ' ')}: {_cell(row[key])}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value).replace("|", "\\|")


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_FIGURES
    target = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUTPUT
    figures = json.loads(source.read_text())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(figures))
    print(f"wrote {target} from {source} ({len(figures)} scenarios)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
