"""Many runners over one table, and many enqueues of one identity at once.

Scaling out is running more `runjobs` processes against one database, so the
claim must never hand one row to two runners, and the live-identity rule must
hold when callers race: exactly one enqueue of a `(kind, key)` wins however
many arrive together. The books in `tests.jobapp` record every execution from
any process or thread, so "exactly once" is counted, not assumed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count

from jobs import Done, JobSpec, enqueue
from jobs.models import Job
from jobs.registry import Registry
from jobs.runner import Runner
from tests.jobapp.jobs import RecordHandler
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def enqueue_records(count: int) -> set[str]:
    """Queue `count` test.record jobs in one transaction; their ids, as text."""
    with transaction.atomic():
        for n in range(count):
            assert enqueue(JobSpec.now("test.record", f"job-{n}"))
    return {str(i) for i in Job.objects.filter(kind="test.record").values_list("id", flat=True)}


def assert_each_ran_exactly_once(job_ids: set[str]) -> None:
    jobs = Job.objects.filter(kind="test.record")
    states = dict(jobs.values_list("state").annotate(n=Count("id")))
    assert states == {"done": len(job_ids)}, f"every job settles done, got {states}"
    assert not jobs.exclude(attempts=1).exists(), "every job was claimed exactly once"
    twice = list(Execution.objects.values("job_id").annotate(n=Count("id")).filter(n__gt=1)[:5])
    assert not twice, f"no job runs twice, yet these did: {twice}"
    ran = {str(i) for i in Execution.objects.values_list("job_id", flat=True)}
    assert ran == job_ids, (
        f"every job ran, and nothing else did: {len(job_ids - ran)} never ran, "
        f"{len(ran - job_ids)} unknown"
    )


def in_threads(count: int, work: Callable[[int], object]) -> list[object]:
    """Run `work(i)` on `count` threads, each closing its database connections at the end.

    Returns the results in order; an exception in any thread fails the test.
    """
    results: list[object] = [None] * count
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "every thread finishes within 60 s"
    if errors:
        raise errors[0]
    return results


@pytest.mark.concurrent_db
def test_three_runjobs_processes_drain_a_backlog_running_every_job_exactly_once(runjobs):
    """The scale-out promise: add processes, and no job runs twice or is lost."""
    job_ids = enqueue_records(3_000)

    processes = [runjobs("--burst") for _ in range(3)]
    for process in processes:
        assert process.wait(timeout=60) == 0, process.output()

    assert_each_ran_exactly_once(job_ids)
    pids = set(Execution.objects.values_list("pid", flat=True))
    assert len(pids) > 1, f"more than one process did work, yet only {pids} did"


class CountingRecordHandler(RecordHandler):
    """test.record, counting the attempts this one runner's instance ran."""

    def __init__(self) -> None:
        self.ran = 0
        self._lock = threading.Lock()

    def run(self, job: Job) -> Done:
        with self._lock:
            self.ran += 1
        return super().run(job)


def test_runners_on_several_threads_drain_a_backlog_running_every_job_exactly_once(make_runner):
    """The claim's exclusion holds between connections of one process, too."""
    job_ids = enqueue_records(2_000)
    runners: list[Runner] = []
    handlers: list[CountingRecordHandler] = []
    for _ in range(4):
        registry = Registry()
        registry.register(CountingRecordHandler)
        handler = registry.get("test.record")
        assert isinstance(handler, CountingRecordHandler)
        handlers.append(handler)
        runners.append(make_runner(registry=registry))
    start = threading.Barrier(len(runners))

    def drain(i: int) -> None:
        start.wait()
        runners[i].drain(timeout=30)

    in_threads(len(runners), drain)

    assert_each_ran_exactly_once(job_ids)
    counts = [handler.ran for handler in handlers]
    assert sum(counts) == len(job_ids), f"the runners ran each job once between them: {counts}"
    assert sum(1 for n in counts if n) > 1, f"more than one runner did work: {counts}"


@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "atomic"])
def test_of_racing_enqueues_of_one_identity_exactly_one_wins(in_transaction):
    """Sixteen callers at once, one job: the live-identity rule is the database's, not luck's."""
    callers = 16
    start = threading.Barrier(callers)
    spec = JobSpec.now("test.record", "same")

    def race(i: int) -> bool:
        connection.ensure_connection()  # connect first, so the inserts are what race
        start.wait()
        if not in_transaction:
            return enqueue(spec)
        with transaction.atomic():
            return enqueue(spec)

    results = in_threads(callers, race)

    assert results.count(True) == 1, f"exactly one of {callers} racing enqueues wins: {results}"
    assert results.count(False) == callers - 1, "every other caller is told False, none raises"
    live = Job.objects.filter(kind="test.record", key="same", state__in=["queued", "running"])
    assert live.count() == 1, "exactly one live row holds the identity"
