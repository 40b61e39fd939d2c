"""`jobs.signals`: each transition sent once, with its documented arguments,
after its transaction commits (never for a rollback), to receivers of its
kind; a receiver that raises is logged and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from jobs import Done, Failed, JobSpec, Retry, enqueue, enqueue_many, operations, signals
from jobs.models import Job, State
from jobs.registry import Registry
from tests.helpers import start_loop
from tests.integration.runner.support import Blocks, Recording, install

pytestmark = pytest.mark.django_db(transaction=True)


class Heard:
    """Every signal a receiver heard: (signal name, sender, arguments)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def names(self, kind: str | None = None) -> list[str]:
        return [name for name, sender, _ in self.calls if kind is None or sender == kind]


@pytest.fixture
def heard() -> Iterator[Heard]:
    heard = Heard()
    receivers = {}
    for name in ("job_enqueued", "job_started", "job_finished", "job_abandoned"):

        def receive(sender: str, name: str = name, **arguments: Any) -> None:
            arguments.pop("signal")
            heard.calls.append((name, sender, arguments))

        receivers[name] = receive
        getattr(signals, name).connect(receive)
    yield heard
    for name, receive in receivers.items():
        getattr(signals, name).disconnect(receive)


class Scripted(Recording):
    kind = "test.scripted"
    outcomes: list[object] = []

    def run(self, job: Job) -> Any:
        return self.outcomes.pop(0) if self.outcomes else Done()


def test_job_enqueued_is_sent_once_after_the_commit_and_never_for_a_rollback(heard):
    with transaction.atomic():
        assert enqueue(JobSpec.now("test.any", "kept"))
        assert heard.calls == [], "not before the commit"
    with transaction.atomic():
        assert enqueue(JobSpec.now("test.any", "rolled-back"))
        transaction.set_rollback(True)
    assert not enqueue(JobSpec.now("test.any", "kept")), "a duplicate is refused"

    job = Job.objects.get(key="kept")
    [(name, sender, arguments)] = heard.calls
    assert (name, sender) == ("job_enqueued", "test.any")
    assert arguments == {
        "job_id": job.id,
        "key": "kept",
        "queue": job.queue,
        "priority": job.priority,
        "run_at": job.run_at,
        "using": "default",
    }


def test_enqueue_many_sends_job_enqueued_for_each_row_it_queued_with_its_id(heard):
    assert enqueue(JobSpec.now("test.any", "held"))
    heard.calls.clear()
    queued = enqueue_many([JobSpec.now("test.any", k) for k in ("a", "held", "b")])
    assert queued == [True, False, True]
    ids = {arguments["job_id"] for _, _, arguments in heard.calls}
    assert ids == set(Job.objects.filter(key__in=["a", "b"]).values_list("id", flat=True))


@pytest.mark.parametrize(
    ("outcome", "said"),
    [(Done(), "done"), (Retry("503"), "retry"), (Failed("refused"), "failed")],
)
def test_an_attempt_sends_job_started_then_job_finished_with_its_outcome(
    heard, registry: Registry, make_runner, configure, outcome, said
):
    configure(retry_base_seconds=60)
    install(registry, Scripted).outcomes = [outcome]
    assert enqueue(JobSpec.now(Scripted.kind, "k"))
    make_runner(registry=registry).drain()

    job_calls = [
        (name, arguments) for name, sender, arguments in heard.calls if sender == Scripted.kind
    ]
    names = [name for name, _ in job_calls]
    expected = ["job_enqueued", "job_started", "job_finished"]
    assert names == expected + (["job_abandoned"] if said == "failed" else [])
    started, finished = job_calls[1][1], job_calls[2][1]
    assert (started["job"].key, started["attempt"]) == ("k", 1)
    assert (finished["job"].key, finished["attempt"], finished["outcome"]) == ("k", 1, said)
    if said == "failed":
        assert job_calls[3][1]["reason"] == "refused"


def test_an_attempt_past_its_budget_finishes_as_timed_out(
    heard, blocked: Blocks, registry: Registry, make_runner, configure
):
    configure(lease_seconds=1, retry_base_seconds=60)
    assert enqueue(JobSpec.now(Blocks.kind, "slow"))
    runner = make_runner(registry=registry)
    runner.run(burst=True)
    assert runner.finish(5)
    blocked.release.set()
    outcomes = [args["outcome"] for name, _, args in heard.calls if name == "job_finished"]
    assert outcomes == ["timed_out"]


def test_an_operators_cancel_finishes_as_cancelled_and_abandons_once(heard, registry: Registry):
    install(registry, Scripted)
    assert enqueue(JobSpec.now(Scripted.kind, "c"))
    operations.cancel([Job.objects.get(key="c").id], by="test", registry=registry)
    names = heard.names(Scripted.kind)
    assert names == ["job_enqueued", "job_finished", "job_abandoned"]
    finished = heard.calls[1][2]
    assert finished["outcome"] == "cancelled"


def test_attempts_released_at_shutdown_finish_as_released(
    heard, blocked: Blocks, registry: Registry, make_runner
):
    assert enqueue(JobSpec.now(Blocks.kind, "held"))
    runner = make_runner(registry=registry)
    loop = start_loop(runner)
    assert blocked.wait_running(1)
    runner.stop()
    loop.join(10)
    assert not runner.finish(0), "still running when the grace (none) ends"
    runner.release()
    blocked.release.set()
    outcomes = [args["outcome"] for name, _, args in heard.calls if name == "job_finished"]
    assert outcomes == ["released"]
    assert Job.objects.get(key="held").state == State.QUEUED


def test_a_receiver_that_raises_is_logged_and_changes_nothing(
    registry: Registry, make_runner, caplog
):
    def broken(sender: str, **arguments: Any) -> None:
        raise RuntimeError("a receiver's bug")

    install(registry, Scripted).outcomes = []
    signals.job_started.connect(broken)
    signals.job_finished.connect(broken)
    try:
        assert enqueue(JobSpec.now(Scripted.kind, "k"))
        make_runner(registry=registry).drain()
    finally:
        signals.job_started.disconnect(broken)
        signals.job_finished.disconnect(broken)
    assert Job.objects.get(key="k").state == State.DONE, "the attempt and its settle went on"
    assert caplog.text.count("jobs_signal_receiver_failed") == 2


def test_a_receiver_for_one_kind_hears_only_that_kind(registry: Registry):
    heard: list[str] = []

    def only(sender: str, **arguments: Any) -> None:
        heard.append(arguments["key"])

    signals.job_enqueued.connect(only, sender="test.one")
    try:
        assert enqueue(JobSpec.now("test.one", "yes"))
        assert enqueue(JobSpec.now("test.other", "no"))
    finally:
        signals.job_enqueued.disconnect(only, sender="test.one")
    assert heard == ["yes"]
    assert not signals.job_enqueued.has_listeners("test.one"), "nothing left connected"


def test_a_receiver_for_one_kind_hears_its_done_attempts_settled_in_a_batch(
    registry: Registry, make_runner
):
    install(registry, Scripted)
    outcomes: list[str] = []

    def only(sender: str, **arguments: Any) -> None:
        outcomes.append(arguments["outcome"])

    signals.job_finished.connect(only, sender=Scripted.kind)
    try:
        assert enqueue(JobSpec.now(Scripted.kind, "done"))
        make_runner(registry=registry).drain()
    finally:
        signals.job_finished.disconnect(only, sender=Scripted.kind)
    assert outcomes == ["done"]
