"""The loop: what a pass claims and settles, when it waits and wakes, what it logs,
how it stops, and the connections it opens."""

from __future__ import annotations

import collections
import logging
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from jobs import Done, JobSpec, enqueue
from jobs.models import LIVE_STATES, Job, State
from jobs.runner import slots
from jobs.store.admission import Admission
from tests.helpers import start_loop, wait_until
from tests.integration.runner.support import (
    WAIT,
    Blocks,
    Fails,
    Recording,
    Retries,
    Succeeds,
    events,
    install,
    the_job,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_rows_of_a_kind_with_no_handler_wait_untouched_while_others_drain(registry, make_runner):
    install(registry, Succeeds)
    assert enqueue(JobSpec.now("test.nobody_handles_this", "k"))
    assert enqueue(JobSpec.now(Succeeds.kind, "k"))
    runner = make_runner(registry=registry)
    runner.drain()

    orphan = the_job("test.nobody_handles_this")
    assert orphan.state == State.QUEUED, "a row no handler answers for waits for one"
    assert orphan.attempts == 0, "and spends none of its attempts"
    assert the_job(Succeeds.kind).state == State.DONE


def test_no_more_than_max_concurrent_attempts_run_at_once(
    registry, make_runner, configure, blocked
):
    configure(max_concurrent=3)
    for n in range(10):
        assert enqueue(JobSpec.now(Blocks.kind, f"k{n}"))
    runner = make_runner(registry=registry)

    assert runner.run_pass() == (3, 3), "a claim takes only as many rows as free slots"
    assert blocked.wait_running(3), "three attempts are running"
    assert runner.run_pass() == (0, 0), "with every slot busy, nothing more is claimed"
    assert Job.objects.filter(state=State.RUNNING).count() == 3

    blocked.release.set()
    runner.drain()

    assert blocked.most_at_once == 3, "never more than max_concurrent at once"
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}
    assert len(blocked.runs) == 10


class Staggered(Recording):
    """Finishes after a delay set by its key's number, so attempts end one by one."""

    kind = "test.staggered"
    step = 0.02

    def run(self, job: Job) -> Any:
        threading.Event().wait(self.step * (int(job.key[1:]) % 4))
        return super().run(job)


def test_the_slots_short_attempts_free_are_claimed_together_by_the_next_pass(
    registry, make_runner, configure, monkeypatch
):
    """Attempts of one pass finish 20 ms apart; the next pass waits for them
    (here without a time limit) and settles and refills all four slots in one
    statement, instead of a pass per finished attempt."""
    monkeypatch.setattr(slots, "GATHER_SECONDS", WAIT)
    install(registry, Staggered)
    configure(max_concurrent=4)
    for n in range(8):
        assert enqueue(JobSpec.now(Staggered.kind, f"k{n}"))
    runner = make_runner(registry=registry)
    passes: list[tuple[int, int]] = []
    settle_and_claim = runner.store.settle_and_claim

    def recorded(done: Any, admission: Admission) -> Any:
        won, claims = settle_and_claim(done, admission)
        passes.append((len(won), len(claims)))
        return won, claims

    monkeypatch.setattr(runner.store, "settle_and_claim", recorded)

    assert runner.run_pass() == (4, 4)
    assert runner.run_pass() == (4, 4)

    assert passes == [(0, 4), (4, 4)], "four settled and four claimed, in the second pass"


def test_a_pass_waits_for_a_long_attempt_once_and_later_passes_not_at_all(
    registry, make_runner, configure, blocked, monkeypatch
):
    monkeypatch.setattr(slots, "GATHER_SECONDS", 0.01)
    configure(max_concurrent=2)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    runner = make_runner(registry=registry)
    waits: list[float | None] = []
    doorbell_wait = runner.doorbell.wait

    def counted(timeout: float | None = None) -> bool:
        waits.append(timeout)
        return bool(doorbell_wait(timeout))

    monkeypatch.setattr(runner.doorbell, "wait", counted)

    assert runner.run_pass() == (1, 2)
    assert blocked.wait_running(1)
    runner.run_pass()
    assert len(waits) == 1, "the pass after the claim waited for the attempt, once"
    runner.run_pass()
    runner.run_pass()

    assert len(waits) == 1, "an attempt still running is not waited for again"


def test_a_pass_of_short_attempts_wakes_the_loop_once_when_the_last_of_them_finishes(
    registry, make_runner, configure, monkeypatch
):
    """Each wake-up of the loop costs more CPU than a no-op job, so the
    attempts one pass started ring the doorbell once between them, not once each."""
    monkeypatch.setattr(slots, "GATHER_SECONDS", WAIT)
    install(registry, Succeeds)
    configure(max_concurrent=4)
    for n in range(4):
        assert enqueue(JobSpec.now(Succeeds.kind, f"k{n}"))
    runner = make_runner(registry=registry)
    rings: list[str] = []
    ring = runner.doorbell.set

    def counted() -> None:
        rings.append(threading.current_thread().name)
        ring()

    monkeypatch.setattr(runner.doorbell, "set", counted)

    assert runner.run_pass() == (4, 4)
    assert wait_until(
        lambda: runner.completer.waiting() == 4 and runner.pool.idle() == runner.pool.size
    )
    assert runner.run_pass() == (0, 4), "the second pass settles the four"

    from_workers = [name for name in rings if name.startswith("jobs-worker")]
    assert len(from_workers) == 1, f"one ring, by the last to finish: {rings}"
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}


def test_an_idle_runner_settles_a_finished_attempt_while_its_pass_mate_still_runs(
    registry, make_runner, configure, blocked
):
    """Once the loop goes idle (its pass claimed fewer rows than it had slots),
    every finish rings again: a short attempt's row is settled at once, not when
    the long one it was claimed with ends, nor at the next poll."""
    install(registry, Succeeds)
    configure(max_concurrent=4, poll_interval_ms=60_000)
    assert enqueue(JobSpec.now(Blocks.kind, "long"))
    assert enqueue(JobSpec.now(Succeeds.kind, "short"))
    runner = make_runner(registry=registry)

    loop = start_loop(runner)
    try:
        assert blocked.started.wait(WAIT), "the long attempt started"
        assert wait_until(lambda: the_job(Succeeds.kind, "short").state == State.DONE, WAIT), (
            "the short attempt was settled while the long one still ran"
        )
        assert the_job(Blocks.kind, "long").state == State.RUNNING
    finally:
        blocked.release.set()
        runner.stop()
        loop.join(WAIT)


def test_each_transition_is_one_structured_log_line_on_the_jobs_logger(
    registry, make_runner, configure, caplog
):
    caplog.set_level(logging.DEBUG, logger="jobs")
    configure(max_attempts=2)
    install(registry, Succeeds)
    install(registry, Retries)
    install(registry, Fails)
    for kind in (Succeeds.kind, Retries.kind, Fails.kind):
        assert enqueue(JobSpec.now(kind, "k"))
    runner = make_runner(registry=registry)
    runner.drain()

    def keyed(name: str) -> list[tuple[str, str]]:
        found = []
        for record in events(caplog, name):
            fields = getattr(record, "fields", {})
            found.append((fields["kind"], fields["key"]))
        return found

    assert sorted(keyed("job_claimed")) == sorted(
        [(Succeeds.kind, "k"), (Retries.kind, "k"), (Fails.kind, "k")]
    ), "one job_claimed per claim"
    assert keyed("job_done") == [(Succeeds.kind, "k")]
    assert keyed("job_retry") == [(Retries.kind, "k")]
    assert keyed("job_failed") == [(Fails.kind, "k")]
    assert keyed("job_abandoned") == [(Fails.kind, "k")]
    assert keyed("job_reclaimed") == []
    retry = events(caplog, "job_retry")[0]
    next_run_at = the_job(Retries.kind).run_at
    assert getattr(retry, "fields", {})["next_run_at"] == next_run_at.isoformat(), (
        "job_retry says when the next attempt runs"
    )
    assert "next_run_at=" in retry.getMessage(), "and says it in the message people read"
    for record in events(caplog, "job_done"):
        assert "outcome=done" in record.getMessage(), "every event carries its outcome"


def test_taking_over_an_expired_lease_is_logged_as_job_reclaimed(registry, make_runner, caplog):
    install(registry, Succeeds)
    past = timezone.now() - timedelta(minutes=10)
    Job.objects.create(
        kind=Succeeds.kind,
        key="k",
        state=State.RUNNING,
        attempts=1,
        max_attempts=5,
        run_at=past,
        lease_expires_at=past + timedelta(minutes=5),
    )
    runner = make_runner(registry=registry)
    runner.drain()

    reclaimed = events(caplog, "job_reclaimed")
    assert len(reclaimed) == 1, "the takeover of a vanished runner's row is logged once"
    assert reclaimed[0].levelno == logging.WARNING, "a vanished runner is worth a warning"
    assert events(caplog, "job_claimed") == [], "and not also as an ordinary claim"
    assert the_job(Succeeds.kind).state == State.DONE


def test_stop_returns_from_run_while_an_attempt_runs_and_finish_waits_for_it_to_settle(
    registry, make_runner, blocked
):
    assert enqueue(JobSpec.now(Blocks.kind, "k"))
    runner = make_runner(registry=registry)

    loop = start_loop(runner)
    try:
        assert blocked.started.wait(WAIT), "the attempt started"
        runner.stop()
        loop.join(WAIT)
        assert not loop.is_alive(), "run() returned although an attempt is still running"
        assert len(runner.in_flight()) == 1
        assert runner.finish(0) is False, "with no grace, the running attempt is left"
        assert the_job(Blocks.kind).state == State.RUNNING

        threading.Timer(0.2, blocked.release.set).start()
        assert runner.finish(WAIT) is True, "finish waited for the attempt"
    finally:
        blocked.release.set()
        loop.join(WAIT)

    assert the_job(Blocks.kind).state == State.DONE, "the attempt settled within the grace"
    assert runner.in_flight() == []


def test_a_live_row_is_never_claimed_twice_by_two_runners_draining_together(
    registry, make_runner, configure
):
    configure(max_concurrent=4)

    class Counts(Recording):
        kind = "test.counts"

        def __init__(self) -> None:
            super().__init__()
            self._lock = threading.Lock()

        def run(self, job: Job) -> Any:
            with self._lock:
                self.runs.append((job.key, job.attempts))
            return Done()

    handler = install(registry, Counts)
    for n in range(40):
        assert enqueue(JobSpec.now(Counts.kind, f"k{n}"))
    runners = [make_runner(registry=registry) for _ in range(2)]
    errors: list[BaseException] = []

    def drain(runner: Any) -> None:
        try:
            runner.drain()
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=drain, args=(r,)) for r in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert not errors, errors
    keys = [key for key, _ in handler.runs]
    assert sorted(keys) == sorted(f"k{n}" for n in range(40)), "every job ran exactly once"
    assert not Job.objects.filter(state__in=LIVE_STATES).exists()


def test_a_drain_opens_a_connection_per_thread_not_per_job_whatever_conn_max_age_says(
    registry, make_runner, configure
):
    """Django closes a connection older than `CONN_MAX_AGE` (0: every one) when a
    request ends; a runner never ends a request, so its loop and each worker
    keep theirs for as long as they live, and a handler's queries reuse its
    worker's. Counted with Django's own `connection_created` signal."""
    from django.db import connection
    from django.db.backends.signals import connection_created

    assert connection.settings_dict["CONN_MAX_AGE"] == 0, "Django's default: close per request"
    configure(max_concurrent=4)

    class Querying(Recording):
        kind = "test.querying"

        def run(self, job: Job) -> Any:
            Job.objects.filter(id=job.id).exists()  # a handler's own ORM query
            return super().run(job)

    handler = install(registry, Querying)
    for n in range(60):
        assert enqueue(JobSpec.now(Querying.kind, f"k{n}"))
    opened: collections.Counter[str] = collections.Counter()  # by thread

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened[threading.current_thread().name] += 1

    connection_created.connect(count)
    try:
        runner = make_runner(registry=registry)
        runner.drain()
    finally:
        connection_created.disconnect(count)

    assert len(handler.runs) == 60, "every job ran"
    assert Job.objects.filter(kind=Querying.kind, state=State.DONE).count() == 60
    # Django's MySQL backend also opens one short-lived connection per
    # connection object, the first time it reads the server's version.
    per_thread = 2 if connection.vendor == "mysql" else 1
    assert max(opened.values()) <= per_thread, f"connections opened, by thread: {dict(opened)}"
    assert len(opened) <= runner.pool.size + 1, (
        f"threads that opened one: {dict(opened)}; the loop and {runner.pool.size} workers ran"
    )
