"""A runner whose machine's clock is a minute off, beside one whose is right
(issue 34, fault 2).

Every due-time and lease decision used the runner's own clock: one 60 s ahead
found every lease of the runner beside it run out and took all its healthy
attempts on its first pass; one 60 s behind wrote leases already run out,
which the runner beside it took at once. Now each runner measures the
database's clock at start and every heartbeat and tells time by it: nothing
healthy is taken, no job runs twice at once, and the skewed runner says how
far off its clock is (`runner_clock_skew`).

The skewed runner runs under libfaketime (Debian's faketime package, which
`.ci/run` installs): its wall clock, Python's `time.time` and `datetime`
with it, is off by the offset; its monotonic clock is left alone, so its
waits still work. The scenario skips, saying so, only where the library
cannot be found.
"""

from __future__ import annotations

import glob
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import JobSpec
from jobs.models import Job
from jobs.queue import enqueue_many
from tests.faults.books import (
    audit,
    ran_twice_at_once,
    read_books,
    record_figures,
    stop,
    wait_until,
)
from tests.jobapp.models import Execution

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

JOBS = 8
HEARTBEAT = 1
#: Each job's run: several leases long, so a lease misread by a minute
#: shows as a takeover while the job still runs.
SECONDS = 5
#: test.sleep's budget: two minutes, far past every attempt here.
ENV = {"TEST_SLEEP_LEASE": "120"}
LIBFAKETIME = "/usr/lib/*/faketime/libfaketime.so.1"


def skewed(offset: int) -> dict[str, str]:
    """The environment of a runner whose clock is `offset` seconds off."""
    found = sorted(glob.glob(LIBFAKETIME))
    if not found:
        pytest.skip(f"libfaketime is missing ({LIBFAKETIME}; .ci/run installs faketime)")
    return {
        **ENV,
        "LD_PRELOAD": found[0],
        "FAKETIME": f"{offset:+d}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("offset", "holder"),
    [
        # Ahead: it would find the normal runner's leases run out.
        (60, "normal"),
        # Behind: the leases it writes would be run out for the normal runner.
        (-60, "skewed"),
    ],
)
def test_a_runner_a_minute_off_takes_no_healthy_attempt_and_runs_no_job_twice_at_once(
    runjobs, configure, offset, holder
):
    configure(heartbeat_seconds=HEARTBEAT, poll_interval_ms=100, max_concurrent=JOBS)
    # Due two minutes ago: ready on either clock, so the skewed runner claims
    # them even where it would otherwise wait a minute.
    due = timezone.now() - timedelta(minutes=2)
    specs = [
        JobSpec("test.sleep", f"job-{n}", run_at=due).with_payload({"seconds": SECONDS})
        for n in range(JOBS)
    ]
    assert all(enqueue_many(specs)), "every job is queued"
    expected = set(Job.objects.values_list("id", flat=True))
    environments = {"normal": ENV, "skewed": skewed(offset)}
    taker = "skewed" if holder == "normal" else "normal"

    runners = {holder: runjobs(env=environments[holder])}
    wait_until(lambda: Execution.objects.count() == JOBS, 30, f"the {holder} runner runs all")
    runners[taker] = runjobs(env=environments[taker])
    wait_until(lambda: "runner_started" in runners[taker].output(), 30, "the other one starts")
    wait_until(lambda: Job.objects.filter(state="done").count() == JOBS, 60, "every job is done")
    statuses = {name: stop(runner) for name, runner in runners.items()}

    with connection.cursor() as cursor:
        books = read_books(cursor, ["test.sleep"])
    result = audit(books, expected)
    # Its executions are recorded on its own clock: brought back onto the real one.
    twice_at_once = ran_twice_at_once(books, {runners["skewed"].pid: timedelta(seconds=-offset)})
    taken = Job.objects.filter(attempts__gt=1).count()
    told = re.findall(r" jobs runner_clock_skew .*?offset_ms=(-?\d+)", runners["skewed"].output())
    record_figures(
        f"runner clock {offset:+d} s",
        load=f"{JOBS} jobs of {SECONDS} s, heartbeat {HEARTBEAT} s, "
        f"the {holder} runner holding them, the {taker} one beside it",
        faults=f"one runner under libfaketime, its clock {offset:+d} s off",
        jobs_lost=result.lost,
        healthy_attempts_taken=taken,
        concurrent_duplicates=twice_at_once,
        stuck=books.stuck,
        skew_logged_ms=told[0] if told else None,
    )
    assert statuses == {"normal": 0, "skewed": 0}, "both runners stopped cleanly"
    assert not result.problems, "the books balance:\n" + "\n".join(result.problems)
    assert taken == 0, f"{taken} healthy attempts were taken"
    assert twice_at_once == 0, f"{twice_at_once} jobs ran twice at the same time"
    assert told, "the skewed runner logs its skew"
    assert abs(int(told[0]) + offset * 1000) < 1000, (
        f"as the database's clock {-offset:+d} s from its own: {told[0]} ms"
    )
