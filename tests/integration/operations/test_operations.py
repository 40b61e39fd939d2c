"""The operator's verbs, called directly: run now, retry, cancel.

The admin actions and the `jobs` command both go through these, so these
tests are where their rules are pinned down: what each touches, what it skips
and why, what it writes, and that cancel's abandon happens exactly once, after
the cancel commits: these tests run inside a transaction that never commits,
so they run its commit callbacks themselves (`django_capture_on_commit_callbacks`).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection
from django.utils import timezone

from jobs import JobHandler, wakeup
from jobs.models import Job, State
from jobs.operations import cancel, retry, run_now
from jobs.registry import Registry
from jobs.store import for_database
from jobs.store.admission import Admission
from tests import factories

pytestmark = pytest.mark.django_db

KIND = "ops.test"


make_job = partial(factories.make_job, kind=KIND)


def reload(job: Job) -> Job:
    return Job.objects.get(id=job.id)


MISSING = "00000000-0000-4000-8000-000000000000"


class Recorder(JobHandler):
    """Records each abandon: (key, reason)."""

    kind = KIND

    def __init__(self) -> None:
        self.abandoned: list[tuple[str, str]] = []

    def run(self, job: Job) -> None:
        raise AssertionError("operations never run a job")

    def abandon(self, job: Job, reason: str) -> None:
        self.abandoned.append((job.key, reason))


@pytest.fixture
def recorder(registry: Registry) -> Recorder:
    registry.register(Recorder)
    handler = registry.get(KIND)
    assert isinstance(handler, Recorder)
    return handler


@pytest.fixture
def doorbell():
    """A runner's wake-up event, subscribed for the duration of the test."""
    event = wakeup.doorbell.subscribe()
    yield event
    wakeup.doorbell.unsubscribe(event)


# -- run now ------------------------------------------------------------------


def test_run_now_brings_a_queued_jobs_run_at_forward_to_now():
    later = make_job("later", run_at=timezone.now() + timedelta(hours=1))
    before = timezone.now()
    report = run_now([later.id])
    assert report.touched == 1
    assert before <= reload(later).run_at <= timezone.now(), "the job is due now"
    assert reload(later).state == State.QUEUED, "and still queued, for a runner to claim"


def test_run_now_skips_missing_running_and_settled_jobs_saying_why():
    running = make_job("running", state=State.RUNNING)
    done = make_job("done", state=State.DONE)
    report = run_now([MISSING, running.id, done.id])
    assert report.touched == 0
    assert report.skipped == Counter(
        {"no such job": 1, "running, not queued": 1, "done, not queued": 1}
    ), "each skipped row says why, in words an operator can act on"
    assert reload(running).run_at == running.run_at, "nothing is written for a skipped row"


def test_run_now_rings_the_wake_up_once_the_transaction_commits(
    doorbell, django_capture_on_commit_callbacks
):
    later = make_job("later", run_at=timezone.now() + timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        run_now([later.id])
        assert not doorbell.is_set(), "a runner woken before the commit would not see the change"
    assert doorbell.is_set(), "runners in this process are woken to claim the job at once"


def test_run_now_that_touches_nothing_wakes_nobody(doorbell, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run_now([make_job("done", state=State.DONE).id])
    assert not doorbell.is_set()


# -- retry --------------------------------------------------------------------


def test_retry_queues_a_failed_job_again_due_now_with_a_fresh_budget():
    failed = make_job(
        "k", state=State.FAILED, attempts=5, run_at=timezone.now() - timedelta(days=1)
    )
    before = timezone.now()
    report = retry([failed.id])
    row = reload(failed)
    assert report.touched == 1
    assert row.state == State.QUEUED
    assert row.attempts == 0, "the attempt budget starts again"
    assert before <= row.run_at <= timezone.now(), "due now, not at its old run_at"
    assert row.finished_at is None, "a queued job has not finished"


def test_retry_queues_a_cancelled_job_again():
    cancelled = make_job("k", state=State.CANCELLED, attempts=2)
    assert retry([cancelled.id]).touched == 1
    assert reload(cancelled).state == State.QUEUED


def test_retry_of_a_job_whose_abandon_is_still_owed_owes_it_no_more():
    """The retirement it was owed for is undone: a live job is not told it was retired."""
    left = make_job("k", state=State.CANCELLED, abandon_owed_at=timezone.now())
    assert retry([left.id]).touched == 1
    assert reload(left).abandon_owed_at is None


def test_retry_skips_live_done_and_missing_jobs_saying_why():
    queued = make_job("q")
    running = make_job("r", state=State.RUNNING)
    done = make_job("d", state=State.DONE)
    report = retry([queued.id, running.id, done.id, MISSING])
    assert report.touched == 0
    assert report.skipped == Counter(
        {
            "queued, not failed or cancelled": 1,
            "running, not failed or cancelled": 1,
            "done, not failed or cancelled": 1,
            "no such job": 1,
        }
    )
    assert reload(running).attempts == 1, "a running job's attempt count is left alone"


def test_retry_is_refused_while_a_live_job_holds_the_identity_and_writes_nothing():
    failed = make_job("k", state=State.FAILED, attempts=5)
    make_job("k")  # a newer job for the same identity, still queued
    other = make_job("other", state=State.FAILED, attempts=5)
    before = reload(failed)
    report = retry([failed.id, other.id])
    assert report.skipped == Counter({f"a live job already holds {KIND}:k": 1})
    after = reload(failed)
    assert (after.state, after.attempts, after.updated_at) == (
        State.FAILED,
        5,
        before.updated_at,
    ), "the refused row is exactly as it was"
    assert report.touched == 1, "the refusal does not stop the rest of the batch"
    assert reload(other).state == State.QUEUED
    assert Job.objects.filter(kind=KIND, key="k", state=State.QUEUED).count() == 1, (
        "one live job per identity, still"
    )


def test_retry_rings_the_wake_up_once_the_transaction_commits(
    doorbell, django_capture_on_commit_callbacks
):
    failed = make_job("k", state=State.FAILED, attempts=5)
    with django_capture_on_commit_callbacks(execute=True):
        retry([failed.id])
        assert not doorbell.is_set()
    assert doorbell.is_set()


# -- cancel -------------------------------------------------------------------


def test_cancel_retires_queued_and_running_jobs_as_cancelled_naming_who(recorder):
    queued = make_job("q")
    running = make_job("r", state=State.RUNNING)
    before = timezone.now()
    report = cancel([queued.id, running.id], by="alice", registry=Registry())
    assert report.touched == 2
    for job in (queued, running):
        row = reload(job)
        assert row.state == State.CANCELLED
        assert row.last_error == "cancelled by alice", "the row says who cancelled it"
        assert row.finished_at is not None
        assert row.finished_at >= before
        assert row.lease_expires_at is None, "a cancelled job holds no lease"


def test_cancel_calls_abandon_only_once_its_own_write_has_committed(
    recorder, registry, django_capture_on_commit_callbacks
):
    queued = make_job("q")
    with django_capture_on_commit_callbacks() as on_commit:
        cancel([queued.id], by="alice", registry=registry)
    row = reload(queued)
    assert recorder.abandoned == [], "nothing is called before the cancel commits"
    assert (row.state, row.abandon_owed_at) == (State.CANCELLED, row.finished_at), (
        "the cancel's own write marks the abandon owed"
    )
    for callback in on_commit:
        callback()
    assert recorder.abandoned == [("q", "cancelled by alice")], "once it commits, abandon runs"
    assert reload(queued).abandon_owed_at is None, "and its debt is cleared"


def test_cancel_calls_abandon_exactly_once_even_when_called_twice(
    recorder, registry, django_capture_on_commit_callbacks
):
    queued = make_job("q")
    with django_capture_on_commit_callbacks(execute=True):
        first = cancel([queued.id], by="alice", registry=registry)
        second = cancel([queued.id], by="bob", registry=registry)
    assert recorder.abandoned == [("q", "cancelled by alice")], (
        "abandon is the terminal notice: once, with the first cancel's reason"
    )
    assert first.touched == 1
    assert second.touched == 0
    assert second.skipped == Counter({"cancelled, not waiting, queued or running": 1})
    assert reload(queued).last_error == "cancelled by alice", "the second cancel wrote nothing"


def test_cancel_skips_settled_and_missing_jobs_saying_why(
    recorder, registry, django_capture_on_commit_callbacks
):
    done = make_job("d", state=State.DONE)
    failed = make_job("f", state=State.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        report = cancel([done.id, failed.id, MISSING], by="alice", registry=registry)
    assert report.skipped == Counter(
        {
            "done, not waiting, queued or running": 1,
            "failed, not waiting, queued or running": 1,
            "no such job": 1,
        }
    )
    assert recorder.abandoned == [], "a job already retired was told already"


def test_cancel_makes_the_running_attempts_late_settle_lose(registry):
    make_job("k", run_at=timezone.now() - timedelta(seconds=1))
    store = for_database()
    [claim] = store.claim(Admission(timezone.now(), {KIND: timedelta(minutes=5)}, 1))
    cancel([claim.job.id], by="alice", registry=registry)
    now = timezone.now()
    assert store.complete(claim.job, now) is False, "its done is discarded"
    late = factories.entry_for(claim.job, "late")
    assert store.retry(claim.job, now, now, "late", late) is False, "as is a retry"
    assert store.retire(claim.job, now, "late", late) is False, "and a retirement"
    row = reload(claim.job)
    assert (row.state, row.last_error) == (State.CANCELLED, "cancelled by alice")


def test_cancel_without_a_handler_in_this_process_cancels_and_leaves_abandon_owed_saying_so(
    registry, django_capture_on_commit_callbacks, caplog
):
    queued = make_job("q", kind="unknown.kind")
    with django_capture_on_commit_callbacks(execute=True):
        report = cancel([queued.id], by="alice", registry=registry)
    assert report.touched == 1
    row = reload(queued)
    assert row.state == State.CANCELLED
    assert row.abandon_owed_at == row.finished_at, "the debt is left for a runner with a handler"
    [left] = [r for r in caplog.records if getattr(r, "event", None) == "job_abandon_left"]
    assert f"job_id={queued.id}" in left.getMessage()


def test_an_abandon_that_raises_does_not_undo_the_cancel(
    registry, django_capture_on_commit_callbacks
):
    class Failing(JobHandler):
        kind = KIND

        def abandon(self, job: Job, reason: str) -> None:
            Job.objects.filter(id=job.id).update(key="written-by-abandon")
            raise RuntimeError("abandon broke")

    registry.register(Failing)
    queued = make_job("q")
    with django_capture_on_commit_callbacks(execute=True):
        assert cancel([queued.id], by="alice", registry=registry).touched == 1
    row = reload(queued)
    assert row.state == State.CANCELLED, "the retirement commits anyway"
    assert row.key == "q", "the failed abandon's own writes are rolled back"
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # the transaction is still usable
