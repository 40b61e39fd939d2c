"""Lifecycle hooks (`jobs.lifecycle`) through a real runner: a hook the generic
path never names may skip a claimed row, and writes what follows a job's
final settle in that settle's own transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from jobs import JobSpec, enqueue, lifecycle
from jobs.models import Job, State
from jobs.operations import cancel
from jobs.store import Store
from tests.integration.runner.support import Fails, Succeeds, install, the_job

pytestmark = pytest.mark.django_db(transaction=True)

LATER = timedelta(hours=1)


class Hook(lifecycle.Hook):
    """Recognises the jobs whose key starts with "hooked": skips those whose key
    says so, and queues a "followed" job after each one's final settle."""

    def __init__(self, *, fail_after: bool = False) -> None:
        self.fail_after = fail_after
        self.settled: list[tuple[str, str]] = []

    def before_run(
        self, job: Job, clock: Callable[[], datetime], using: str
    ) -> lifecycle.Verdict | None:
        if not job.key.startswith("hooked"):
            return None
        if job.key.endswith("skip"):
            return lifecycle.Verdict(
                lambda store, row, now: store.reschedule(row, now, now + LATER), "told to"
            )
        return lifecycle.Verdict()

    def after_settle(
        self, store: Store, job: Job, now: datetime, state: str, started: datetime | None
    ) -> None:
        if not job.key.startswith("hooked"):
            return
        self.settled.append((job.key, state))
        enqueue(JobSpec.now("test.followed", job.key), using=store.using)
        if self.fail_after:
            raise RuntimeError("the hook's own write failed")


@pytest.fixture
def hooked() -> Iterator[Callable[..., Hook]]:
    added: list[Hook] = []

    def add(**kwargs: bool) -> Hook:
        hook = Hook(**kwargs)
        lifecycle.register(hook)
        added.append(hook)
        return hook

    yield add
    for hook in added:
        lifecycle.HOOKS.remove(hook)


def test_a_hook_may_move_a_claimed_row_unrun_and_its_handler_is_never_called(
    registry, make_runner, hooked
):
    hooked()
    handler = install(registry, Succeeds)
    assert enqueue(JobSpec.now(Succeeds.kind, "hooked-skip"))
    assert enqueue(JobSpec.now(Succeeds.kind, "plain"))
    make_runner(registry=registry).drain()

    assert handler.runs == [("plain", 1)], "the skipped row's handler never ran"
    skipped = the_job(Succeeds.kind, "hooked-skip")
    assert skipped.state == State.QUEUED, "moved as the hook said, not settled"
    assert skipped.attempts == 0, "its attempt given back"
    plain_finished = the_job(Succeeds.kind, "plain").finished_at
    assert plain_finished is not None
    assert skipped.run_at > plain_finished


def test_a_hook_writes_after_a_recognised_done_and_after_a_retirement_but_not_for_others(
    registry, make_runner, hooked
):
    hook = hooked()
    install(registry, Succeeds)
    install(registry, Fails)
    for kind, key in [(Succeeds.kind, "hooked-a"), (Fails.kind, "hooked-b"), (Succeeds.kind, "x")]:
        assert enqueue(JobSpec.now(kind, key))
    make_runner(registry=registry).drain()

    assert sorted(hook.settled) == [("hooked-a", State.DONE), ("hooked-b", State.FAILED)]
    followed = sorted(Job.objects.filter(kind="test.followed").values_list("key", flat=True))
    assert followed == ["hooked-a", "hooked-b"]


def test_what_a_hook_writes_after_a_settle_commits_only_with_that_settle(
    registry, make_runner, hooked
):
    hooked(fail_after=True)
    handler = install(registry, Succeeds)
    assert enqueue(JobSpec.now(Succeeds.kind, "hooked-a"))
    make_runner(registry=registry).drain()

    assert handler.runs == [("hooked-a", 1)]
    assert the_job(Succeeds.kind, "hooked-a").state == State.RUNNING, (
        "the settle rolled back with the hook: the row is left to its lease"
    )
    assert not Job.objects.filter(kind="test.followed").exists(), "the hook's write rolled back"


def test_an_operators_cancel_tells_the_hooks_in_its_own_transaction(hooked):
    hook = hooked()
    assert enqueue(JobSpec.now(Succeeds.kind, "hooked-c"))
    cancel([the_job(Succeeds.kind, "hooked-c").id], by="test")

    assert hook.settled == [("hooked-c", State.CANCELLED)]
    assert Job.objects.filter(kind="test.followed", key="hooked-c").exists()


class Marking(lifecycle.Hook):
    """Follows the jobs its column marks (`traceparent`, set by hand here),
    and must never be asked `before_run`."""

    marks = "traceparent"

    def __init__(self) -> None:
        self.settled: list[tuple[str, str]] = []

    def before_run(
        self, job: Job, clock: Callable[[], datetime], using: str
    ) -> lifecycle.Verdict | None:
        raise AssertionError("a hook that marks its jobs is never asked before_run")

    def after_settle(
        self, store: Store, job: Job, now: datetime, state: str, started: datetime | None
    ) -> None:
        self.settled.append((job.key, state))


def test_a_hook_that_marks_its_jobs_by_a_column_sees_the_done_of_those_only(registry, make_runner):
    hook = Marking()
    lifecycle.register(hook)
    try:
        install(registry, Succeeds)
        assert enqueue(JobSpec.now(Succeeds.kind, "marked"))
        assert enqueue(JobSpec.now(Succeeds.kind, "plain"))
        Job.objects.filter(key="marked").update(
            traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        )
        make_runner(registry=registry).drain()
    finally:
        lifecycle.HOOKS.remove(hook)
    assert hook.settled == [("marked", State.DONE)], (
        "a marked job's Done reaches after_settle; a plain job's settles in the batch, unseen"
    )
