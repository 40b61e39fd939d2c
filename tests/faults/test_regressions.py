"""In-process regression tests for the bugs the fault suite found (fast; any database).

- A runner started while its database was down crashed with a traceback: the
  config read in `Runner.__init__` and the presence row in `run()` came before
  the loop's error handling. Start-up now waits, logging
  `runner_database_unavailable`, and tries again.
- With DEBUG on (the project's default), every query the runner and its
  workers ran stayed in Django's per-connection query log, since a runner never
  ends a request: a 100,000-job drain grew the process by ~22 MB. The loop and
  the workers now clear it every hundred passes or attempts.
"""

from __future__ import annotations

import logging
import threading

import pytest
from django.db import DatabaseError, connection

from jobs import Done, JobHandler, JobSpec, enqueue
from jobs.models import Job
from jobs.runner import startup
from jobs.runner.pool import FORGET_QUERIES_EVERY, WorkerPool
from jobs.runner.presence import Presence

pytestmark = pytest.mark.django_db(transaction=True)


class Quick(JobHandler):
    kind = "regression.quick"

    def run(self, job: Job) -> Done:
        Job.objects.filter(pk=job.pk).exists()  # a query on the worker's connection
        return Done()


def test_a_runner_whose_database_is_down_at_start_logs_it_retries_and_then_runs(
    registry, make_runner, configure, monkeypatch, caplog
):
    configure(poll_interval_ms=20)
    registry.register(Quick)
    assert enqueue(JobSpec.now("regression.quick", "k"))
    monkeypatch.setattr(startup, "STARTUP_RETRY_FIRST_SECONDS", 0.01)
    failures = {"left": 2}
    real = Presence.register

    def flaky(self, *args):
        if failures["left"]:
            failures["left"] -= 1
            raise DatabaseError("connection refused")
        return real(self, *args)

    monkeypatch.setattr(Presence, "register", flaky)
    runner = make_runner(registry=registry)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        runner.drain()
    unavailable = [
        r for r in caplog.records if getattr(r, "event", "") == "runner_database_unavailable"
    ]
    assert len(unavailable) == 2, "each failed start-up is logged as runner_database_unavailable"
    assert Job.objects.get(key="k").state == "done", "once the database answers the runner drains"


def test_a_runner_stopped_while_waiting_for_its_database_returns_without_running(
    registry, make_runner, monkeypatch
):
    registry.register(Quick)
    monkeypatch.setattr(
        Presence,
        "register",
        lambda *args: (_ for _ in ()).throw(DatabaseError("connection refused")),
    )
    runner = make_runner(registry=registry)
    threading.Timer(0.2, runner.stop).start()
    runner.run()
    assert runner.passes == 0, "a runner stopped before its database answered never claims"


def test_with_debug_on_the_runners_loop_keeps_no_growing_query_log(
    registry, make_runner, configure, settings
):
    settings.DEBUG = True
    configure(poll_interval_ms=20)
    registry.register(Quick)
    runner = make_runner(registry=registry)
    for _ in range(3 * FORGET_QUERIES_EVERY):
        Job.objects.exists()  # one query logged on the loop's connection per pass
        runner.run_pass()
    assert len(connection.queries_log) <= 2 * FORGET_QUERIES_EVERY, (
        "the loop clears the query log DEBUG keeps, so it never grows with passes"
    )


def test_with_debug_on_a_worker_thread_keeps_no_growing_query_log(settings):
    settings.DEBUG = True
    seen: list[int] = []
    finished = threading.Semaphore(0)

    def work(item: int) -> None:
        seen.append(len(connection.queries_log))
        Job.objects.filter(key=str(item)).exists()
        finished.release()

    pool: WorkerPool[int] = WorkerPool(work, name="regression")
    try:
        for item in range(3 * FORGET_QUERIES_EVERY):
            pool.submit(item)
            assert finished.acquire(timeout=10), "the worker runs the item"
    finally:
        pool.close()
    # seen[1] is the log after the first item: its one query and whatever the
    # thread's new connection ran on opening (MySQL sets its session up).
    opening = seen[1] - 1
    assert max(seen) < FORGET_QUERIES_EVERY + opening, (
        f"a reused worker's query log is cleared every {FORGET_QUERIES_EVERY} items, "
        f"so it never grows past that and the {opening} opening statements; "
        f"it reached {max(seen)}"
    )
