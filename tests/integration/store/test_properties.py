"""Property-based: a state machine over the production path explores what
hand-written examples miss.

Hypothesis drives enqueues over a few identities, passes of two real runners
(`Runner`, lanes A and B of one process) at a clock the machine controls and
with a `max_concurrent` it draws per pass, the end of any attempt that ever
held a claim (stale ones whose claim was taken over included), timeouts,
lease expiry, and cancels, on the test database. A pass is the runner's own
(`Runner.pass_once`): its admission (slots, leases, the kind's concurrency
limit), the completer's `Done` batch settled in the statement that claims
(`jobs.store.limits` and the store), the executor building an attempt per
claim, and its report of what it reaped, settled and claimed. Only the worker
threads are the machine's: the runner's pool is replaced by one that keeps
the attempts, and the machine hands each end to the runner's completer as a
worker would: a `Done` waits for that runner's next pass; `Retry`, `Failed`
and `Reschedule` are settled at once by the completer's fenced single
settles, as is a timeout by the loop; a result after a timeout is discarded.
After every step it checks the queue's promises:

- at most one live row per (kind, key);
- a row's attempts never exceed its max_attempts by more than the number of
  its claims that never settled ("crashes");
- abandon is called at most once per job (through `jobs.retirement`, from the
  completer or `jobs.operations.cancel`);
- a settled row never changes again;
- the attempt that owns a row always settles it, and any other attempt's
  settle writes nothing (fencing);
- no more attempts of the kind hold live leases than its concurrency limit.

Each example runs inside a savepoint that is rolled back at its end, so
examples never see each other's rows; what a settle's commit runs (a retired
job's `abandon`, after the retirement) is run at the end of the step that
settled it (`committed`). `derandomize` makes CI runs repeatable.
"""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import TestCase
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jobs import Done, Failed, JobHandler, JobSpec, Reschedule, Retry, enqueue, operations
from jobs.config import JobsSettings
from jobs.handlers import Outcome
from jobs.models import LIVE_STATES, SETTLED_STATES, Job, State
from jobs.registry import Registry
from jobs.runner import Runner
from jobs.runner.attempt import Attempt, lease_for
from jobs.runner.completer import Completer

KIND = "test.property"
KEYS = ["a", "b", "c"]
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SETTINGS = JobsSettings(max_attempts=3, retry_base_seconds=1, retry_max_seconds=4, lease_seconds=60)
#: The lease a claim writes: three heartbeats, shorter than the budget, so a
#: runner's attempt may outlive its lease and another runner take its row.
LEASE = lease_for(SETTINGS.lease, SETTINGS.heartbeat)
RUNNERS = ["A", "B"]
#: The kind's `concurrency_limit`: at most this many attempts at once, across both.
LIMIT = 2

OUTCOMES: dict[str, Outcome] = {
    "complete": Done(),
    "retry": Retry("the upstream answered 503"),
    "retire": Failed("the CA refused the order"),
    "reschedule": Reschedule(timedelta(seconds=30)),
}


class Counting(JobHandler):
    """Counts `abandon` calls per job; the machine never calls `run`."""

    kind = KIND
    concurrency_limit = LIMIT

    def __init__(self) -> None:
        self.abandoned: collections.Counter[uuid.UUID] = collections.Counter()

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned[job.id] += 1


@dataclass
class Held:
    """One claim a runner made, its attempt, whether its worker has handed over how
    it ended, and whether the attempt has settled the row."""

    runner: str
    attempt: Attempt
    ended: bool = False
    won: bool = False


class Kept:
    """A runner's worker pool that keeps what it is handed: the machine ends
    each attempt itself, as a worker would."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    def submit_many(self, attempts: Iterable[Attempt]) -> None:
        self.attempts += attempts

    def close(self, timeout: float | None = None) -> None:
        pass


def committed() -> Any:
    """Run, as the block ends, what the commits of the block's transactions would
    run (the machine's example never commits): a retirement's `abandon` call."""
    return TestCase.captureOnCommitCallbacks(execute=True)


def owns(row: dict[str, Any], job: Job) -> bool:
    """Whether the attempt that claimed `job` still owns `row`, as a settle's fence reads it."""
    return bool(
        row["state"] == State.RUNNING
        and row["attempts"] == job.attempts
        and row["lease_expires_at"] == job.lease_expires_at
    )


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.now = T0
        self.registry = Registry()
        self.registry.register(Counting)
        handler = self.registry.get(KIND)
        assert isinstance(handler, Counting)
        self.handler = handler
        #: Each runner's config, as its next pass reads it.
        self.config = dict.fromkeys(RUNNERS, SETTINGS)
        self.runners = {name: self.runner(lane, name) for lane, name in enumerate(RUNNERS)}
        #: Every claim ever made, in order, and each by its attempt.
        self.held: list[Held] = []
        self.held_by: dict[Attempt, Held] = {}
        #: Per row, the claims made since its attempts were last reset.
        self.since_reset: dict[uuid.UUID, list[Held]] = collections.defaultdict(list)
        #: Every row's id, in the order it was queued.
        self.ids: list[uuid.UUID] = []
        #: Settled rows as they were when first seen settled.
        self.settled: dict[uuid.UUID, dict[str, Any]] = {}

    def runner(self, lane: int, name: str) -> Runner:
        runner = Runner(
            registry=self.registry,
            clock=lambda: self.now,
            settings=lambda: self.config[name],
            lane=lane,
            lanes=len(RUNNERS),
            recover=False,
        )
        runner.pool = Kept()  # type: ignore[assignment]
        return runner

    def teardown(self) -> None:
        try:
            for runner in self.runners.values():
                runner.close(wait=False)
        finally:
            transaction.set_rollback(True)
            self.atomic.__exit__(None, None, None)

    # -- helpers ------------------------------------------------------------------

    def row(self, job_id: uuid.UUID) -> dict[str, Any]:
        return dict(Job.objects.filter(id=job_id).values().get())

    def queue(self, key: str, max_attempts: int) -> bool:
        """Enqueue one job at the machine's clock; note its id, in order, if it was new.

        Ids are numbered in the order jobs are queued rather than random: a claim
        takes rows of one `run_at` in the order of their ids on MySQL (InnoDB
        keeps rows in primary-key order), and with random ids the same steps
        claimed different rows from one run to the next, which Hypothesis
        refuses as flaky data generation.
        """
        spec = JobSpec(KIND, key, run_at=self.now, max_attempts=max_attempts)
        if not enqueue(spec, job_id=uuid.UUID(int=len(self.ids) + 1)):
            return False
        self.ids.append(Job.objects.get(kind=KIND, key=key, state__in=LIVE_STATES).id)
        return True

    def running(self) -> list[Held]:
        """The attempts whose workers have not ended them (timed out ones included)."""
        return [held for held in self.held if not held.ended]

    def overdue(self) -> list[Held]:
        """The attempts in a runner's slots past their budget: what its loop times out."""
        return [
            self.held_by[attempt]
            for runner in self.runners.values()
            for attempt in runner.in_flight()
            if attempt.deadline <= self.now
        ]

    def end(self, data: st.DataObject, outcome: str) -> None:
        """A running attempt, drawn from `data`, ends with `outcome`."""
        held = data.draw(st.sampled_from(self.running()), label="attempt")
        held.ended = True
        self.settles(
            held, outcome, lambda completer: completer.ended(held.attempt, OUTCOMES[outcome])
        )

    def settles(self, held: Held, outcome: str, hand_over: Callable[[Completer], object]) -> None:
        """Hand `held`'s attempt to its runner's completer with `hand_over`, and check
        what that wrote: a `Done` waits for the next pass; anything else settles the
        row now if the attempt owns it, and writes nothing if not, or if the
        attempt's result was already settled (a timeout, then a late result)."""
        job = held.attempt.job
        before = self.row(job.id)
        taken_already = held.attempt.taken
        owner = not taken_already and owns(before, job)
        with committed():
            hand_over(self.runners[held.runner].completer)
        after = self.row(job.id)
        if outcome == "complete" and not taken_already:
            assert after == before, "a Done waits in the completer for its runner's next pass"
            return
        if not owner:
            assert after == before, (
                f"a {outcome} by an attempt that does not own the row writes nothing"
            )
            return
        assert after["state"] != State.RUNNING, f"the owning attempt's {outcome} settles the row"
        held.won = True
        if after["attempts"] == 0:  # rescheduled: a fresh budget
            self.since_reset[job.id] = []

    # -- rules --------------------------------------------------------------------

    @initialize(budgets=st.lists(st.integers(1, 3), min_size=len(KEYS), max_size=len(KEYS)))
    def enqueue_every_identity(self, budgets: list[int]) -> None:
        """Start with work queued, so examples spend their steps on claims and settles."""
        for key, max_attempts in zip(KEYS, budgets, strict=True):
            assert self.queue(key, max_attempts), f"{key} is free at the start"

    @rule(key=st.sampled_from(KEYS), max_attempts=st.integers(1, 3))
    def enqueue_one(self, key: str, max_attempts: int) -> None:
        held = Job.objects.filter(kind=KIND, key=key, state__in=LIVE_STATES).exists()
        assert self.queue(key, max_attempts) is (not held), (
            "enqueue takes a free identity and refuses one a live row holds"
        )

    @rule(runner=st.sampled_from(RUNNERS), max_concurrent=st.integers(2, 6))
    def run_pass(self, runner: str, max_concurrent: int) -> None:
        """One pass of `runner` (`Runner.pass_once`) under a `max_concurrent` drawn
        for it: it times out what overran, settles its `Done` batch in the
        statement that claims into its free slots, and reports what it did."""
        chosen = self.runners[runner]
        self.config[runner] = dataclasses.replace(SETTINGS, max_concurrent=max_concurrent)
        chosen.reload()
        batch = [attempt for attempt, _ in chosen.completer.batches.done]
        overdue = [a for a in chosen.in_flight() if a.deadline <= self.now and not a.taken]
        before = {a.job.id: self.row(a.job.id) for a in [*batch, *overdue]}
        owners = {a.job.id for a in batch if owns(before[a.job.id], a.job)}
        with committed():
            report = chosen.pass_once(self.now)

        assert set(report.reaped) == set(overdue), "every attempt past its budget is timed out"
        for attempt in report.reaped:
            if owns(before[attempt.job.id], attempt.job):
                assert not owns(self.row(attempt.job.id), attempt.job), (
                    "the owning attempt's timeout settles the row"
                )
                self.held_by[attempt].won = True
                if self.row(attempt.job.id)["attempts"] == 0:
                    self.since_reset[attempt.job.id] = []
        assert report.settled == owners, "the batch settles exactly the rows its attempts own"
        claimed = {attempt.job.id for attempt in report.claimed}
        for attempt in batch:
            job, after = attempt.job, self.row(attempt.job.id)
            if job.id in owners:
                assert after["state"] == State.DONE, "the owning attempt's Done settles the row"
                self.held_by[attempt].won = True
            elif job.id in claimed:
                assert (after["finished_at"], after["result"]) == (
                    before[job.id]["finished_at"],
                    before[job.id]["result"],
                ), "a Done by an attempt that does not own the row writes nothing"
                assert after["state"] == State.RUNNING, "only the pass's own claim moved it"
            else:
                assert after == before[job.id], (
                    "a Done by an attempt that does not own the row writes nothing"
                )
        share = chosen.slots.share(self.config[runner])
        assert not report.claimed or len(chosen.in_flight()) <= share, (
            "a pass claims only into its runner's share of max_concurrent"
        )
        for attempt in report.claimed:
            assert attempt.unusable is None, "a row written by enqueue is always usable"
            held = Held(runner, attempt)
            self.held.append(held)
            self.held_by[attempt] = held
            self.since_reset[attempt.job.id].append(held)

    @precondition(lambda self: bool(self.running()))
    @rule(data=st.data())
    def end_done(self, data: st.DataObject) -> None:
        """An attempt ends `Done`, handed to its runner's completer as a worker hands
        it. A rule of its own, since a `Done` takes a path of its own (the batch)."""
        self.end(data, "complete")

    @precondition(lambda self: bool(self.running()))
    @rule(data=st.data(), outcome=st.sampled_from(sorted(set(OUTCOMES) - {"complete"})))
    def end_otherwise(self, data: st.DataObject, outcome: str) -> None:
        """An attempt ends with `outcome`, handed to its runner's completer as a worker hands it."""
        self.end(data, outcome)

    @precondition(lambda self: bool(self.overdue()))
    @rule(data=st.data())
    def time_out(self, data: st.DataObject) -> None:
        """A runner's loop times out an attempt in its slots that overran its budget."""
        held = data.draw(st.sampled_from(self.overdue()), label="attempt")
        self.settles(held, "timeout", lambda completer: completer.time_out(held.attempt, self.now))

    @rule(seconds=st.integers(0, 10))
    def tick(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule()
    def expire_leases(self) -> None:
        """Every runner holding a claim has gone quiet for longer than the lease."""
        self.now += LEASE + timedelta(seconds=1)

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.ids), label="job")
        with committed():
            operations.cancel([job_id], by="the property test", registry=self.registry)

    # -- invariants ---------------------------------------------------------------

    @invariant()
    def at_most_one_live_row_per_identity(self) -> None:
        live = collections.Counter(
            Job.objects.filter(state__in=LIVE_STATES).values_list("kind", "key")
        )
        assert all(n == 1 for n in live.values()), f"one live row per identity: {live}"

    @invariant()
    def attempts_exceed_the_budget_only_by_claims_that_never_settled(self) -> None:
        for job_id, attempts, max_attempts in Job.objects.values_list(
            "id", "attempts", "max_attempts"
        ):
            crashes = sum(1 for held in self.since_reset[job_id] if not held.won)
            assert attempts <= max_attempts + crashes, (
                f"a row's {attempts} attempts stay within its budget of {max_attempts} "
                f"plus its {crashes} unsettled claims"
            )

    @invariant()
    def abandon_is_called_at_most_once_per_job(self) -> None:
        twice = {job_id: n for job_id, n in self.handler.abandoned.items() if n > 1}
        assert not twice, f"no job is abandoned more than once: {twice}"

    @invariant()
    def a_settled_row_never_changes_again(self) -> None:
        for job_id, snapshot in self.settled.items():
            assert self.row(job_id) == snapshot, "a settled row is never written again"
        for row in Job.objects.filter(state__in=SETTLED_STATES).values():
            self.settled.setdefault(row["id"], dict(row))

    @invariant()
    def no_more_attempts_hold_live_leases_than_the_kinds_limit(self) -> None:
        live = Job.objects.filter(
            kind=KIND, state=State.RUNNING, lease_expires_at__gt=self.now
        ).count()
        assert live <= LIMIT, f"{live} attempts of a kind limited to {LIMIT} hold live leases"

    @invariant()
    def every_failed_or_cancelled_row_was_abandoned_once(self) -> None:
        retired = Job.objects.filter(state__in=[State.FAILED, State.CANCELLED])
        for job_id in retired.values_list("id", flat=True):
            assert self.handler.abandoned[job_id] == 1, "a retired job is abandoned exactly once"


@pytest.mark.django_db
def test_the_queues_promises_hold_under_any_sequence_of_claims_settles_expiries_and_cancels():
    run_state_machine_as_test(
        QueueMachine,
        settings=settings(
            max_examples=50,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
