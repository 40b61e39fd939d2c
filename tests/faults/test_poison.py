"""Poison jobs under a supervisor: handlers that kill their own process.

`runjobs --processes 2` drains a backlog with poison jobs among it: handlers
that call `os._exit(1)` or SIGKILL their process, as a segfaulting C
extension or the OOM killer would, on every attempt. Each kills a child that
had become ready to claim, however soon after its start, so the supervisor
restarts it within 2 s and never gives up (before issue 34 such deaths
counted as failed starts: `supervisor_gave_up`, exit 4, with rows left
running). Each death spends an attempt of the poison job, which is retired
after `max_attempts` with a reason saying its attempts ended with their
process dying, `abandon` called once; the jobs that shared a dying process
ran again only where that death explains it.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import defaultdict
from datetime import datetime

import pytest
from django.db import connection

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import Books, audit, read_books, record_figures, stop, wait_until

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

NORMAL = 400
POISON_EACH = 3  # of each kind: os._exit and SIGKILL
MAX_ATTEMPTS = 3
#: A poison attempt's lease: 1 s budget + 1 s (`lease_for`), under 3 heartbeats.
ENV = {"TEST_POISON_LEASE": "1"}

_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ jobs (\w+) (.*)$")


def events(output: str, name: str) -> list[tuple[float, dict[str, str]]]:
    """Each `name` event the log holds: its time (epoch seconds) and fields."""
    found = []
    for line in output.splitlines():
        match = _LINE.match(line)
        if match and match.group(2) == name:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found.append((when, dict(re.findall(r"(\w+)=(\S+)", match.group(3)))))
    return found


def overlaps(books: Books, deaths: dict[int, float]) -> int:
    """Executions of one job that ran at the same time: an unfinished one
    lasted until its process died."""
    count = 0
    for runs in books.runs.values():
        spans = sorted(
            (
                run.started_at.timestamp(),
                run.finished_at.timestamp()
                if run.finished_at
                else deaths.get(run.pid, float("inf")),
            )
            for run in runs
        )
        count += sum(1 for (_, end), (start, _) in itertools.pairwise(spans) if start < end)
    return count


@pytest.mark.timeout(240)
def test_poison_jobs_never_stop_a_supervisor_and_are_retired_after_their_attempts_with_abandon_once(
    runjobs, configure
):
    configure(max_concurrent=4, heartbeat_seconds=1, poll_interval_ms=100)
    normal = [JobSpec.now("test.record", f"job-{n}").with_max_attempts(20) for n in range(NORMAL)]
    poison = [
        JobSpec.now(kind, f"{kind}-{n}").with_max_attempts(MAX_ATTEMPTS)
        for n in range(POISON_EACH)
        for kind in ("test.poison", "test.sigkill")
    ]
    specs = list(normal)
    for place, spec in enumerate(poison):  # spread through the backlog
        specs.insert(place * NORMAL // len(poison), spec)
    assert all(enqueue_many(specs)), "every job is queued"
    poison_ids = set(
        Job.objects.filter(kind__in=["test.poison", "test.sigkill"]).values_list("id", flat=True)
    )
    expected = set(
        Job.objects.filter(key__in=[spec.key for spec in specs]).values_list("id", flat=True)
    )
    settled = Job.objects.filter(id__in=expected, state__in=["done", "failed"])

    started = time.monotonic()
    supervisor = runjobs("--processes", "2", env=ENV)
    wait_until(
        lambda: settled.count() == len(expected) or supervisor.process.poll() is not None,
        180,
        "every job settles",
    )
    took = time.monotonic() - started
    alive = supervisor.process.poll() is None
    # This test's jobs only: the built-in hourly sweep may be running at the hour.
    still_running = Job.objects.filter(id__in=expected, state="running").count()
    status = stop(supervisor)
    output = supervisor.output()

    stopping = min((when for when, _ in events(output, "supervisor_stopping")), default=time.time())
    exits = events(output, "runner_process_exited")
    deaths = {int(fields["pid"]): when for when, fields in exits if when < stopping}
    restarts = events(output, "runner_process_restarted")
    # The gap between a child's death and its replacement's start, per index.
    died_at: dict[str, list[float]] = defaultdict(list)
    for when, fields in exits:
        died_at[fields["index"]].append(when)
    gaps = []
    for when, fields in restarts:
        before = [moment for moment in died_at[fields["index"]] if moment <= when]
        gaps.append(when - max(before))
    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.record", "test.poison", "test.sigkill"])
    result = audit(
        books,
        expected,
        state=lambda job_id: "failed" if job_id in poison_ids else "done",
        killed=deaths,
    )
    concurrent = overlaps(books, deaths)
    # A claim that finds a poison job's budget spent retires it unrun; one
    # claimed beside another poison job can die with its process first.
    past_budget = sum(
        job.attempts - MAX_ATTEMPTS - 1 for job in Job.objects.filter(id__in=poison_ids)
    )
    # A takeover's entry is written just after its claim, before the pass's
    # attempts run; an attempt of an earlier pass can kill the process first.
    unrecorded = sum(
        job.attempts - len(job.attempt_history) for job in Job.objects.filter(id__in=poison_ids)
    )
    collateral = sum(
        1 for job_id, runs in books.runs.items() if job_id not in poison_ids and len(runs) > 1
    )
    abandons = {job_id: books.abandoned.get(job_id, 0) for job_id in poison_ids}
    record_figures(
        "poison jobs under a supervisor",
        load=(
            f"{NORMAL} quick jobs and {2 * POISON_EACH} poison jobs (os._exit, SIGKILL; "
            f"max_attempts {MAX_ATTEMPTS}), runjobs --processes 2 x 4 slots, 1 s heartbeat"
        ),
        faults=f"{len(deaths)} child deaths caused by the poison jobs",
        jobs_lost=result.lost,
        concurrent_duplicates=concurrent,
        stuck=books.stuck,
        abandon_calls_max=max(abandons.values(), default=0),
        completed_attempts_repeated=result.repeated,
        unexplained_repeats=result.unexplained_repeats,
        jobs_run_again_after_sharing_a_dying_process=collateral,
        abandon_calls_per_poison_job=sorted(set(abandons.values())),
        retiring_claims_lost_with_a_dying_process=past_budget,
        poison_attempts_missing_from_the_record=unrecorded,
        supervisor_gave_up=int("supervisor_gave_up" in output),
        longest_restart_gap_seconds=round(max(gaps, default=0.0), 2),
        time_to_drain_seconds=round(took, 2),
    )
    print(
        f"\n{len(deaths)} deaths, {len(restarts)} restarts (gaps {min(gaps, default=0):.2f} to "
        f"{max(gaps, default=0):.2f} s), {collateral} normal jobs ran again, "
        f"{past_budget} retiring claims died, {unrecorded} attempts unrecorded, "
        f"drained in {took:.1f} s"
    )

    assert alive, f"the supervisor never gives up:\n{output[-4000:]}"
    assert "supervisor_gave_up" not in output
    assert status == 0, "and stops cleanly at the end"
    assert len(deaths) >= MAX_ATTEMPTS, "the poison jobs did kill children"
    assert max(gaps) < 3, f"a dead child is replaced within 2 s (and a loop's tick): {gaps}"
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
    assert concurrent == 0, "no job ran twice at the same time"
    assert still_running == 0, "nothing is left running"
    for job in Job.objects.filter(id__in=poison_ids):
        handler_runs = sorted(run.attempt for run in books.runs.get(job.id, []))
        assert job.state == "failed", job.key
        assert handler_runs == sorted(set(handler_runs)), "no attempt ran twice"
        assert max(handler_runs, default=0) <= MAX_ATTEMPTS, "its handler never ran past its budget"
        assert job.attempts > MAX_ATTEMPTS, "the claim that found the budget spent retired it"
        assert (
            f"attempts exhausted: all {MAX_ATTEMPTS} of its attempts ended with their process "
            "dying before they settled" in job.last_error
        ), job.last_error
        outcomes = [entry.outcome for entry in job.attempt_history]
        assert outcomes[-1] == "failed", (job.key, job.errors)
        assert set(outcomes[:-1]) == {"reclaimed"}, (job.key, job.errors)
        assert all("died or vanished" in entry.error for entry in job.attempt_history[:-1])
    assert set(abandons.values()) == {1}, f"abandon once per poison job: {abandons}"
