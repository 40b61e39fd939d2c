"""Property-based: a state machine over the real store explores what hand-written
examples miss.

Hypothesis drives enqueues over a few identities, claims by two runners (A and
B) at a clock the machine controls, settles by any attempt that ever held a
claim (stale ones whose claim was taken over included), lease expiry, and
cancels, on the test database. After every step it checks the queue's promises:

- at most one live row per (kind, key);
- a row's attempts never exceed its max_attempts by more than the number of
  its claims that never settled ("crashes");
- abandon is called at most once per job (through `jobs.retirement`, from the
  executor or `jobs.operations.cancel`);
- a settled row never changes again;
- the attempt that owns a row always settles it, and any other attempt's
  settle writes nothing (fencing).

Each example runs inside a savepoint that is rolled back at its end, so
examples never see each other's rows. `derandomize` makes CI runs repeatable.
"""

from __future__ import annotations

import collections
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
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
from jobs.runner.attempt import Attempt
from jobs.runner.executor import Executor
from jobs.store import Claim, for_database

KIND = "test.property"
KEYS = ["a", "b", "c"]
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
SETTINGS = JobsSettings(max_attempts=3, retry_base_seconds=1, retry_max_seconds=4, lease_seconds=60)

OUTCOMES: dict[str, Outcome] = {
    "complete": Done(),
    "retry": Retry("the upstream answered 503"),
    "retire": Failed("the CA refused the order"),
    "reschedule": Reschedule(timedelta(seconds=30)),
}


class Counting(JobHandler):
    """Counts `abandon` calls per job; the machine never calls `run`."""

    kind = KIND

    def __init__(self) -> None:
        self.abandoned: collections.Counter[uuid.UUID] = collections.Counter()

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned[job.id] += 1


@dataclass
class Held:
    """One claim a runner made, and whether its attempt has settled the row."""

    runner: str
    claim: Claim
    won: bool = False


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.now = T0
        self.store = for_database()
        self.registry = Registry()
        self.registry.register(Counting)
        handler = self.registry.get(KIND)
        assert isinstance(handler, Counting)
        self.handler = handler
        self.executor = Executor(self.store, clock=lambda: self.now)
        #: Every claim ever made, in order.
        self.held: list[Held] = []
        #: Per row, the claims made since its attempts were last reset.
        self.since_reset: dict[uuid.UUID, list[Held]] = collections.defaultdict(list)
        #: Every row's id, in the order it was queued (random ids, fixed order).
        self.ids: list[uuid.UUID] = []
        #: Settled rows as they were when first seen settled.
        self.settled: dict[uuid.UUID, dict[str, Any]] = {}

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.atomic.__exit__(None, None, None)

    # -- helpers ------------------------------------------------------------------

    def row(self, job_id: uuid.UUID) -> dict[str, Any]:
        return dict(Job.objects.filter(id=job_id).values().get())

    def queue(self, key: str, max_attempts: int) -> bool:
        """Enqueue one job at the machine's clock; note its id, in order, if it was new."""
        spec = JobSpec(KIND, key, run_at=self.now, max_attempts=max_attempts)
        if not enqueue(spec):
            return False
        self.ids.append(Job.objects.get(kind=KIND, key=key, state__in=LIVE_STATES).id)
        return True

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

    @rule(runner=st.sampled_from(["A", "B"]), limit=st.integers(1, 3))
    def claim(self, runner: str, limit: int) -> None:
        for claim in self.store.claim(self.now, {KIND: LEASE}, limit):
            assert claim.unusable is None, "a row written by enqueue is always usable"
            held = Held(runner, claim)
            self.held.append(held)
            self.since_reset[claim.job.id].append(held)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), outcome=st.sampled_from(sorted(OUTCOMES)))
    def settle(self, data: st.DataObject, outcome: str) -> None:
        held = data.draw(st.sampled_from(self.held), label="attempt")
        job = held.claim.job
        before = self.row(job.id)
        owns = (
            before["state"] == State.RUNNING
            and before["attempts"] == job.attempts
            and before["lease_expires_at"] == job.lease_expires_at
        )
        attempt = Attempt(held.claim, self.handler, SETTINGS, LEASE, self.now)
        self.executor.settle(attempt, OUTCOMES[outcome], self.now)
        after = self.row(job.id)
        if not owns:
            assert after == before, (
                f"a {outcome} by an attempt that does not own the row writes nothing"
            )
            return
        assert after["state"] != State.RUNNING, f"the owning attempt's {outcome} settles the row"
        held.won = True
        if after["attempts"] == 0:  # rescheduled: a fresh budget
            self.since_reset[job.id] = []

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
