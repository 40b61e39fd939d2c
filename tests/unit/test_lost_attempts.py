"""What the attempt record says of attempts whose process died: the entry a
reclaim writes (`history.lost_attempt`), and the reason a job is retired
with once such deaths have spent its attempts (`history.exhausted`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobs import history
from jobs.models import Job

T0 = datetime(2025, 6, 1, 12, tzinfo=UTC)


def claimed(attempts: int, max_attempts: int, *ends: tuple[int, history.Outcome]) -> Job:
    """A job at claim `attempts`, its record holding an entry per (attempt, outcome)."""
    stored: list[dict[str, object]] = []
    for attempt, outcome in ends:
        entry = history.record(
            attempt=attempt,
            started_at=T0,
            ended_at=T0 + timedelta(seconds=attempt),
            runner=f"host:{attempt}",
            outcome=outcome,
            error="...",
        )
        stored = history.appended(stored, entry)
    return Job(kind="k", key="x", attempts=attempts, max_attempts=max_attempts, errors=stored)


LOST, RETRY = history.Outcome.RECLAIMED, history.Outcome.RETRY


def test_a_reclaimed_attempts_entry_says_its_process_died_or_vanished_and_names_its_runner():
    job = Job(kind="k", key="x", attempts=3, max_attempts=5)
    entry = history.lost_attempt(job, "host:41", T0, T0 + timedelta(minutes=1))
    assert (entry.attempt, entry.outcome, entry.runner) == (2, "reclaimed", "host:41")
    assert entry.error == (
        "the process running attempt 2 died or vanished: "
        "its lease expired on runner host:41 and the attempt never settled"
    )
    assert entry.exception_class_path == "jobs.history.AttemptReclaimed"


def test_a_job_whose_every_attempt_died_with_its_process_is_retired_saying_so():
    job = claimed(4, 3, (1, LOST), (2, LOST), (3, LOST))
    assert history.exhausted(job) == (
        "attempts exhausted: all 3 of its attempts ended with their process dying "
        "before they settled (the last on runner host:3)"
    )


def test_claims_past_the_budget_whose_process_died_before_they_retired_it_are_told_apart():
    """A claim that finds the budget spent retires the row unrun; another job
    killing its process first (a poison job claimed beside it) leaves it to
    the next claim."""
    job = claimed(6, 3, (1, LOST), (2, LOST), (3, LOST), (4, LOST), (5, LOST))
    assert history.exhausted(job) == (
        "attempts exhausted: all 3 of its attempts ended with their process dying "
        "before they settled, and 2 claims past its budget too (the last on runner host:5)"
    )


def test_a_job_of_one_attempt_is_told_so():
    job = claimed(2, 1, (1, LOST))
    assert history.exhausted(job) == (
        "attempts exhausted: its one attempt ended with its process dying before it settled "
        "(on runner host:1)"
    )


def test_only_the_last_attempts_in_a_row_that_died_are_counted():
    job = claimed(4, 3, (1, RETRY), (2, LOST), (3, LOST))
    assert history.exhausted(job) == (
        "attempts exhausted: its last 2 attempts (of 3, a budget of 3) ended with their "
        "process dying before they settled (the last on runner host:3)"
    )
    one = claimed(3, 2, (1, RETRY), (2, LOST))
    assert history.exhausted(one).startswith("attempts exhausted: its last attempt (of 2, ")


def test_an_attempt_missing_from_the_record_never_settled_and_counts_as_a_death():
    """Every other end of an attempt writes its own entry; only a reclaim's
    note can be missing (the process that took the row over died first)."""
    job = claimed(4, 3, (2, LOST), (3, LOST))
    assert history.exhausted(job).startswith("attempts exhausted: all 3 of its attempts ended")


def test_without_a_note_of_the_last_attempt_the_reason_says_only_that_it_never_settled():
    job = claimed(4, 3, (1, RETRY), (2, RETRY), (3, RETRY))
    assert history.exhausted(job) == (
        "attempts exhausted: claim 4 of a budget of 3; the last attempt never settled "
        "(its process died or vanished)"
    )
