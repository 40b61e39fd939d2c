"""Bulk actions by filter (`jobs.bulk`) and dead letters (`jobs.dead_letters`),
called directly, on every database: what a count says, how the walk batches,
what it touches, what it skips and why, the cap, and a redrive's budget.

Batches and windows are made small here (`small`), so a dozen rows exercise
what a hundred thousand do; tests/acceptance/test_bulk_process.py runs a
large retry beside a real runner on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import types
import uuid
from collections import Counter
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from freezegun import freeze_time

from jobs import JobSpec, Workflow, bulk, dead_letters, history, retirement
from jobs.bulk import CANCEL, RETRY, RUN_NOW, Filter, Selection
from jobs.models import Job, State
from jobs.store import batches, for_database
from tests import factories
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db

KIND = factories.RECORDED

make_job = partial(factories.make_job, leased=True)


def failed(key: str, error: str = "gave up after 5 of 5 attempts: RuntimeError: 503", **fields):
    return make_job(key, State.FAILED, attempts=5, last_error=error, **fields)


def selection(**parts) -> Selection:
    found = Filter(**parts)
    return Selection(found.jobs(connection.alias, timezone.now()), said=str(found))


def states(*jobs: Job) -> list[str]:
    return [Job.objects.get(id=job.id).state for job in jobs]


@pytest.fixture
def small(monkeypatch):
    """Batches of 3 rows (a cancel's of 2) and windows of 5."""
    monkeypatch.setattr(bulk, "BATCH", 3)
    monkeypatch.setattr(bulk, "CANCEL_BATCH", 2)
    monkeypatch.setattr(bulk, "WINDOW", 5)


@pytest.fixture
def transactions(monkeypatch):
    """Each transaction the walk opens, as the list of ids the batch verb wrote in it."""
    opened: list[list[uuid.UUID]] = []
    real_atomic, real_requeue = transaction.atomic, batches.requeue

    @contextlib.contextmanager
    def atomic(*args, **kwargs):
        opened.append([])
        with real_atomic(*args, **kwargs):
            yield

    def requeue(store, ids, now, max_attempts=None):
        opened[-1].extend(ids)
        return real_requeue(store, ids, now, max_attempts)

    monkeypatch.setattr(bulk, "transaction", types.SimpleNamespace(atomic=atomic))
    monkeypatch.setattr(batches, "requeue", requeue)
    return opened


# -- count ---------------------------------------------------------------------


def test_a_count_says_how_many_jobs_match_by_state_and_which_the_action_would_skip(small):
    for n in range(7):
        failed(f"f{n}")
    make_job("c", State.CANCELLED)
    make_job("q", State.QUEUED)
    make_job("d", State.DONE)
    make_job("other", State.FAILED, kind="other.kind")
    counted = bulk.count(selection(kinds=(KIND,)), RETRY)
    assert counted.by_state == {"failed": 7, "cancelled": 1, "queued": 1, "done": 1}
    assert counted.acting == 8, "the number to confirm: the failed and cancelled ones"
    assert counted.skipped() == Counter(
        {"queued, not failed or cancelled": 1, "done, not failed or cancelled": 1}
    )
    assert str(counted).startswith(f"Retry 8 jobs matching kind {KIND}; would skip ")


def test_a_count_writes_nothing():
    job = failed("f")
    bulk.count(selection(), RETRY)
    assert states(job) == ["failed"]


def test_the_walk_reads_the_table_a_window_of_rows_at_a_time_whatever_matches(small):
    """So a filter matching few rows among millions never makes one long scan."""
    for n in range(12):
        make_job(f"d{n}", State.DONE)
    lone = failed("lone")
    with CaptureQueriesContext(connection) as queries:
        counted = bulk.count(selection(states=(State.FAILED,)), RETRY)
    assert counted.acting == 1
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 3, "13 rows in windows of 5: three counting statements"
    assert all(" <= " in sql for sql in counts[:-1]), "each bounded above by its window's last id"
    assert states(lone) == ["failed"]


@freeze_time("2026-03-01 12:00:00")
def test_since_matches_jobs_whose_state_changed_within_that_long():
    recent, old = failed("recent"), failed("old")
    Job.objects.filter(id=recent.id).update(updated_at=timezone.now() - timedelta(minutes=90))
    Job.objects.filter(id=old.id).update(updated_at=timezone.now() - timedelta(hours=3))
    counted = bulk.count(selection(since=timedelta(hours=2)), RETRY)
    assert counted.acting == 1


def test_error_contains_matches_the_last_errors_text_in_any_case():
    failed("a", "gave up after 5 of 5 attempts: HTTPError: 503 Service Unavailable")
    failed("b", "gave up after 5 of 5 attempts: HTTPError: 404 NOT FOUND")
    assert bulk.count(selection(error_contains="service unavailable"), RETRY).acting == 1


def test_more_jobs_than_the_cap_are_refused_before_anything_is_written():
    jobs = [failed(f"f{n}") for n in range(3)]
    counted = bulk.count(selection(), RETRY)
    with pytest.raises(bulk.TooMany, match=r"3 jobs match .* more than the 2 one action may touch"):
        counted.within(2)
    counted.within(3)
    assert states(*jobs) == ["failed"] * 3


# -- act -----------------------------------------------------------------------


def test_a_bulk_retry_writes_each_batch_in_a_transaction_of_its_own(small, transactions):
    jobs = [failed(f"f{n}") for n in range(8)]
    chosen = selection()
    outcome = bulk.act(chosen, bulk.count(chosen, RETRY), by="ops")
    assert outcome.touched == 8
    assert states(*jobs) == ["queued"] * 8
    assert [len(ids) for ids in transactions] == [3, 2, 3], (
        "windows of 5 rows, at most 3 written per transaction: no transaction holds two batches"
    )
    assert sorted(i for ids in transactions for i in ids) == sorted(job.id for job in jobs)


def test_a_bulk_retry_gives_a_fresh_budget_due_now_and_owes_no_abandon(small):
    job = failed("f", run_at=timezone.now() - timedelta(days=1), abandon_owed_at=timezone.now())
    before = timezone.now()
    chosen = selection()
    bulk.act(chosen, bulk.count(chosen, RETRY), by="ops")
    row = Job.objects.get(id=job.id)
    assert (row.state, row.attempts, row.max_attempts) == (State.QUEUED, 0, 5)
    assert before <= row.run_at <= timezone.now()
    assert row.finished_at is None
    assert row.abandon_owed_at is None


def test_a_bulk_retry_skips_a_job_whose_identity_a_live_job_holds_saying_why(small):
    held = failed("same")
    make_job("same", State.QUEUED)
    twin_a, twin_b = failed("twin"), make_job("twin", State.CANCELLED)
    free = failed("free")
    chosen = selection(states=(State.FAILED, State.CANCELLED))
    outcome = bulk.act(chosen, bulk.count(chosen, RETRY), by="ops")
    assert states(held, free) == ["failed", "queued"]
    assert states(twin_a, twin_b).count("queued") == 1, (
        "of two retired jobs of one identity, one is queued again and the other left"
    )
    assert outcome.touched == 2
    assert outcome.skipped == Counter({bulk.HELD: 2})
    assert "skipped 2 (a live job already holds its kind and key)" in str(outcome)


def test_a_job_that_changed_after_the_count_is_left_and_reported_as_changed(small):
    jobs = [failed(f"f{n}") for n in range(4)]
    chosen = selection()
    counted = bulk.count(chosen, RETRY)
    later = counted.at + timedelta(seconds=1)
    Job.objects.filter(id=jobs[0].id).update(updated_at=later)  # failed again since
    Job.objects.filter(id=jobs[1].id).delete()  # pruned since
    outcome = bulk.act(chosen, counted, by="ops")
    assert states(jobs[0]) == ["failed"], "a row that changed since the count is left alone"
    assert outcome.touched == 2
    assert outcome.changed == 2
    assert str(outcome).endswith("; 2 left, changed since counted")


def test_a_row_taken_by_someone_else_mid_walk_is_skipped_with_its_state_as_the_reason(
    small, monkeypatch
):
    jobs = [failed(f"f{n}") for n in range(2)]
    real = batches.requeue

    def meanwhile(store, ids, now, max_attempts=None):
        Job.objects.filter(id=jobs[0].id).update(state=State.QUEUED)  # another operator's retry
        return real(store, ids, now, max_attempts)

    monkeypatch.setattr(batches, "requeue", meanwhile)
    chosen = selection()
    outcome = bulk.act(chosen, bulk.count(chosen, RETRY), by="ops")
    assert outcome.touched == 1
    assert outcome.skipped == Counter({"queued, not failed or cancelled": 1})


@pytest.mark.parametrize(
    ("action", "entry", "said"),
    [(RETRY, "retried", "retried by ops"), (RUN_NOW, "run_now", "run now by ops")],
)
def test_a_bulk_retry_or_run_now_leaves_each_job_an_entry_saying_who_and_when(
    small, action, entry, said
):
    if action is RETRY:
        jobs = [failed(f"f{n}") for n in range(4)]
    else:
        jobs = [make_job(f"q{n}", run_at=timezone.now() + timedelta(hours=1)) for n in range(4)]
    chosen = selection(kinds=(KIND,))
    before = timezone.now()
    assert bulk.act(chosen, bulk.count(chosen, action), by="ops").touched == 4
    for job in jobs:
        (last,) = history.entries(Job.objects.get(id=job.id).errors)[-1:]
        assert last.outcome == entry, last
        assert last.ended_at is not None
        assert before <= last.ended_at <= timezone.now()
        assert last.error.startswith(said), last.error


def test_a_bulk_run_now_makes_the_matching_queued_jobs_due_now(small):
    later = [make_job(f"q{n}", run_at=timezone.now() + timedelta(hours=1)) for n in range(4)]
    make_job("r", State.RUNNING)
    before = timezone.now()
    chosen = selection(kinds=(KIND,))
    counted = bulk.count(chosen, RUN_NOW)
    assert counted.skipped() == Counter({"running, not queued": 1})
    outcome = bulk.act(chosen, counted, by="ops")
    assert outcome.touched == 4
    assert outcome.skipped == Counter({"running, not queued": 1})
    assert all(before <= Job.objects.get(id=j.id).run_at <= timezone.now() for j in later)


def test_a_bulk_cancel_retires_queued_and_running_jobs_each_abandon_once_after_its_batch(
    small, django_capture_on_commit_callbacks
):
    queued = [make_job(f"q{n}") for n in range(4)]
    running = make_job("r", State.RUNNING)
    chosen = selection(kinds=(KIND,))
    with django_capture_on_commit_callbacks(execute=True):
        outcome = bulk.act(chosen, bulk.count(chosen, CANCEL), by="alice")
    assert states(*queued, running) == ["cancelled"] * 5
    assert outcome.touched == 5
    assert outcome.running == 1
    assert "(1 of them running: the attempt runs on, its result discarded)" in str(outcome)
    assert Counter(Abandonment.objects.values_list("key", flat=True)) == Counter(
        {"q0": 1, "q1": 1, "q2": 1, "q3": 1, "r": 1}
    ), "each handler's abandon ran once"
    assert Job.objects.get(id=running.id).last_error == "cancelled by alice"


def test_a_bulk_cancel_by_filter_cancels_waiting_steps_and_their_workflows_rule_follows(
    django_capture_on_commit_callbacks,
):
    """A waiting step is cancelled by a filter as a queued job is (abandon once),
    whichever of a batch's steps comes first: a dependent the cancel of its
    dependency released is still cancelled by the filter that matched it."""
    flow = Workflow("bulk")
    first = flow.add(JobSpec.now("test.flow", "first"))
    second = flow.add(JobSpec.now("test.flow", "second"), after=[first])
    flow.add(JobSpec.now("test.flow", "report"), after=[second], when="settled")
    assert flow.enqueue() is not None
    chosen = selection(kinds=("test.flow",), states=(State.WAITING,))
    counted = bulk.count(chosen, CANCEL)
    assert counted.acting == 2, "both waiting steps are counted as cancelled"

    with django_capture_on_commit_callbacks(execute=True):
        outcome = bulk.act(chosen, counted, by="alice")

    found = dict(Job.objects.filter(kind="test.flow").values_list("key", "state"))
    assert found["first"] == State.QUEUED, "a step the filter left alone"
    assert found["second"] == State.CANCELLED
    assert found["report"] == State.CANCELLED
    assert outcome.touched == 2
    assert Counter(Abandonment.objects.values_list("key", flat=True)) == Counter(
        {"second": 1, "report": 1}
    ), "abandon once each"


# -- dead letters ----------------------------------------------------------------


def test_dead_letters_group_by_kind_and_error_line_with_counts_and_first_and_last_seen():
    t0 = timezone.now() - timedelta(hours=3)
    for n in range(3):
        failed(f"a{n}", finished_at=t0 + timedelta(hours=n))
    failed(  # an older release's row: the whole traceback after "gave up ..."
        "old",
        "gave up after 3 of 3 attempts: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in run\nRuntimeError: 503\n',
        finished_at=t0 - timedelta(days=1),
    )
    make_job("c", State.CANCELLED, last_error="cancelled by alice")
    failed("o", "gave up after 5 of 5 attempts: RuntimeError: 503", kind="other.kind")
    make_job("d", State.DONE, last_error="RuntimeError: 503")
    groups = dead_letters.groups()
    found = {(g.kind, g.line): (g.count, g.failed, g.cancelled) for g in groups}
    assert found == {
        (KIND, "RuntimeError: 503"): (4, 4, 0),
        (KIND, "cancelled by alice"): (1, 0, 1),
        ("other.kind", "RuntimeError: 503"): (1, 1, 0),
    }, "a done job is no dead letter; an old traceback row joins today's one-liners"
    top = groups[0]
    assert (top.kind, top.line) == (KIND, "RuntimeError: 503"), "most jobs first"
    assert top.first_seen == t0 - timedelta(days=1)
    assert top.last_seen == t0 + timedelta(hours=2)
    assert {g.kind for g in dead_letters.groups(kinds=("other.kind",))} == {"other.kind"}


def test_a_redrive_retries_one_group_only_with_the_new_budget(small):
    group = [failed(f"a{n}") for n in range(4)]
    mentions = failed("m", "gave up after 5 of 5 attempts: ValueError: not RuntimeError: 503")
    other_kind = failed("o", kind="other.kind")
    chosen = dead_letters.selection(KIND, "RuntimeError: 503")
    counted = bulk.count(chosen, RETRY)
    assert counted.acting == 4, "a row that only mentions the line is not of the group"
    outcome = bulk.act(chosen, counted, by="ops", max_attempts=9)
    assert outcome.touched == 4
    assert states(*group) == ["queued"] * 4
    assert states(mentions, other_kind) == ["failed", "failed"]
    rows = Job.objects.filter(id__in=[j.id for j in group])
    assert {(r.attempts, r.max_attempts) for r in rows} == {(0, 9)}, (
        "nine attempts from now: the new budget"
    )


def test_a_bulk_cancel_retires_fewer_rows_a_transaction_since_each_takes_the_one_retirement(
    small, monkeypatch
):
    """A cancel writes its row's attempt record and runs its hooks, milliseconds a
    row: its batches are smaller, so no transaction holds its locks for seconds."""
    opened: list[list[uuid.UUID]] = []
    real_atomic, real_cancel = transaction.atomic, retirement.cancel

    @contextlib.contextmanager
    def atomic(*args, **kwargs):
        opened.append([])
        with real_atomic(*args, **kwargs):
            yield

    def cancel(store, job_id, *args, **kwargs):
        opened[-1].append(job_id)
        return real_cancel(store, job_id, *args, **kwargs)

    monkeypatch.setattr(bulk, "transaction", types.SimpleNamespace(atomic=atomic))
    monkeypatch.setattr(retirement, "cancel", cancel)
    queued = [make_job(f"q{n}") for n in range(5)]
    chosen = selection(kinds=(KIND,))
    assert bulk.act(chosen, bulk.count(chosen, CANCEL), by="ops").touched == 5
    assert [len(ids) for ids in opened] == [2, 2, 1]
    assert states(*queued) == ["cancelled"] * 5


@pytest.mark.postgresql
def test_a_batch_never_reads_the_ready_index_for_its_identities_even_with_stale_statistics():
    """Right after a bulk retry made thousands of rows live, the statistics still
    say few are: a lookup filtered on `live` then read the whole ready index
    (375 ms at 50,000 live rows), where the identity index answers each key."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobs_job (id, kind, "key", payload, state, attempts, max_attempts, run_at,
                                  last_error, created_at, updated_at, finished_at, queue, priority)
            SELECT gen_random_uuid(), %s, 'k' || n, '{}', 'failed', 5, 5, now(), 'x', now(),
                   now(), now(), 'default', 0
            FROM generate_series(10000, 39999) AS n
            """,
            [KIND],
        )
        cursor.execute("ANALYZE jobs_job")
    Job.objects.filter(kind=KIND, key__lt="k25").update(state=State.QUEUED, finished_at=None)
    ids = list(Job.objects.filter(kind=KIND, state=State.FAILED).values_list("id", flat=True))
    with CaptureQueriesContext(connection) as queries:
        batches.requeue(for_database(), ids[:500], timezone.now())
    [lookup] = [q["sql"] for q in queries if '"key" IN' in q["sql"] and "SELECT" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {lookup}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_job_ready" not in plan, plan
