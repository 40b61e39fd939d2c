"""Runners SIGKILLed while they settle the dependencies of joins (PostgreSQL):
a release is written in the transaction of the settle that makes it, so a
kill leaves both or neither, and never a waiting step whose dependencies all
settled; and a join is released once, so it runs once.

Twenty rounds. Each queues joins over many quick steps on a queue of its
own, served by a runner of its own (started ahead, so it is warm when its
round comes) and by a survivor that serves every queue: the two settle the
steps side by side, and the round's runner is killed a random few
milliseconds after it starts on them, most likely inside a settle's
transaction. The survivor takes its rows over once their leases expire, and
the next round's runner has started meanwhile, its start-up repair looking
for stranded steps. Joins run on the survivor alone, which is never killed, so
a join run twice could only be a release made twice. A stranded step would
either stay waiting or be found by a repair, which logs `workflow_repaired`:
neither may happen.
"""

from __future__ import annotations

import random
import signal
import time
from collections import defaultdict
from datetime import datetime
from functools import partial

import pytest

from jobs import JobSpec, Workflow
from jobs.models import Dependency, Job, State
from tests.conftest import RunJobs
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]

ROUNDS = 20
#: Joins a round, and steps each join waits for.
JOINS, FAN = 2, 30
#: How many rounds ahead a round's runner is started, to be warm when its round comes.
AHEAD = 2
#: test.sleep's budget: its lease (1.25 s) is what a killed runner's rows wait out.
ENV = {"TEST_SLEEP_LEASE": "0.25"}
JOIN_QUEUE = "joins"
KINDS = ("test.sleep", "test.flow")


@pytest.fixture(autouse=True)
def quick_poll(configure) -> None:
    configure(poll_interval_ms=50, retry_base_seconds=0)


def queue(round_: int) -> str:
    return f"round-{round_}"


def queue_round(round_: int) -> None:
    for n in range(JOINS):
        flow = Workflow(f"round {round_} join {n}")
        fan = [
            flow.add(JobSpec.now("test.sleep", f"{round_}-{n}-{i}").with_queue(queue(round_)))
            for i in range(FAN)
        ]
        flow.add(JobSpec.now("test.flow", f"{round_}-{n}-join").with_queue(JOIN_QUEUE), after=fan)
        assert flow.enqueue() is not None


def listening(process: RunJobs) -> bool:
    """Whether `process` has started and listens for wake-ups: warm."""
    return "runner_listening" in process.output()


def unsettled() -> dict[str, list[tuple[str, str, str | None]]]:
    """Each join not done: its dependencies not done, with their edges' outcomes."""
    found = {}
    for join in Job.objects.filter(kind="test.flow").exclude(state=State.DONE):
        edges = dict(
            Dependency.objects.filter(step_id=join.id).values_list("depends_on_id", "outcome")
        )
        found[f"{join.key} ({join.state})"] = [
            (key, state, edges[job_id])
            for job_id, key, state in Job.objects.filter(id__in=list(edges)).values_list(
                "id", "key", "state"
            )
            if state != State.DONE or edges[job_id] != State.DONE
        ]
    return found


def test_runners_killed_while_settling_a_joins_dependencies_never_strand_a_step_nor_run_a_join_twice(  # noqa: E501 - the sentence it proves
    runjobs,
):
    chooser = random.Random()
    # One slot for each round's queue: the round's own runner does most of its steps.
    capped = [argument for r in range(ROUNDS) for argument in ("--queue", f"{queue(r)}=1")]
    survivor = runjobs("--queue", JOIN_QUEUE, *capped, env=ENV)
    runners = {r: runjobs("--queue", queue(r), env=ENV) for r in range(AHEAD)}
    for round_ in range(ROUNDS):
        if round_ + AHEAD < ROUNDS:
            runners[round_ + AHEAD] = runjobs("--queue", queue(round_ + AHEAD), env=ENV)
        victim = runners[round_]
        assert wait_until(partial(listening, victim), 30), (
            f"round {round_}'s runner is up: " + victim.output()[-2000:]
        )
        queue_round(round_)
        started = Execution.objects.filter(pid=victim.pid, key__startswith=f"{round_}-")
        assert wait_until(started.exists, 30), (
            f"round {round_}'s runner started: " + (victim.output()[-2000:])
        )
        time.sleep(chooser.uniform(0.0, 0.08))  # the kill's timing: what the rounds vary
        victim.process.send_signal(signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL

    joins = Job.objects.filter(kind="test.flow")
    assert wait_until(lambda: joins.filter(state=State.DONE).count() == ROUNDS * JOINS, 30), (
        f"every join ran; those that did not, with their unsettled dependencies: {unsettled()}"
    )
    survivor.process.send_signal(signal.SIGTERM)
    assert survivor.wait(30) == 0, survivor.output()[-3000:]

    assert not Job.objects.filter(state=State.WAITING).exists(), "no step is left waiting"
    assert set(Job.objects.filter(kind__in=KINDS).values_list("state", flat=True)) == {State.DONE}
    outputs = [process.output() for process in [survivor, *runners.values()]]
    assert not any("workflow_repaired" in output for output in outputs), (
        "no step was stranded for a repair to find"
    )
    finished: dict[str, datetime] = {}
    joined: dict[str, list[datetime]] = defaultdict(list)
    for key, started_at, finished_at in Execution.objects.values_list(
        "key", "started_at", "finished_at"
    ):
        if key.endswith("-join"):
            joined[key].append(started_at)
        elif finished_at is not None:
            finished[key] = max(finished_at, finished.get(key, finished_at))
    assert len(joined) == ROUNDS * JOINS, "every join ran"
    twice = {key: len(starts) for key, starts in joined.items() if len(starts) != 1}
    assert not twice, f"each join ran exactly once, not {twice}"
    for key, [start] in joined.items():
        prefix = key.removesuffix("join")
        assert start >= max(finished[f"{prefix}{i}"] for i in range(FAN)), (
            f"{key} started after all {FAN} of its steps finished"
        )
    taken_over = Job.objects.filter(kind="test.sleep", attempts__gt=1).count()
    assert taken_over > 0, "the kills landed on work in flight, taken over after them"
