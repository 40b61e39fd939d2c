"""The ledger and its audit after a PostgreSQL crash, without a database.

`audit_crash` is what lets the crash scenario say "nothing lost, nothing
unexplained"; these tests show it fails the books it must fail and explains
only the reruns a crash can cause.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from tests.faults import ledger
from tests.faults.books import Row, audit_crash
from tests.faults.ledger import LedgerRun, parse_ledger, read_ledger

#: The crash was ordered at t=100 and the server was gone by t=101.
CRASH = (100.0, 101.0)
WINDOW = 2.0
LEASE = "2026-01-01T00:00:03+00:00"
OTHER_LEASE = "2026-01-01T00:00:05+00:00"


def run(job: uuid.UUID, attempt: int, started: float, finished: float | None, lease=LEASE):
    return LedgerRun(job, "k", attempt, lease, 1, started, finished)


def done(attempts: int) -> Row:
    return Row("done", attempts, 25, "")


def check(rows, runs, not_landed=frozenset()):
    return audit_crash(
        rows, runs, set(rows), crash=CRASH, window=WINDOW, not_landed=set(not_landed)
    )


def test_a_job_whose_row_is_not_done_is_counted_lost_and_fails_the_books():
    job, gone = uuid.uuid4(), uuid.uuid4()
    result = audit_crash(
        {job: Row("running", 1, 25, "")},
        [run(job, 1, 10, 11)],
        {job, gone},
        crash=CRASH,
        window=WINDOW,
    )
    assert result.lost == 2, "a job still running and a job with no row are both lost"
    assert len(result.problems) == 2, "each lost job is named in a problem"


def test_a_done_job_the_ledger_never_saw_run_is_unexplained():
    job = uuid.uuid4()
    result = check({job: done(1)}, [])
    assert result.unexplained == 1, "a row done without any run has no explanation"
    assert result.problems, "and it fails the books"


def test_a_done_job_whose_final_attempt_never_ran_is_unexplained():
    job = uuid.uuid4()
    result = check({job: done(2)}, [run(job, 1, 10, 11)])
    assert result.unexplained == 1, "the Done must come from a run with the row's attempt number"


def test_a_single_clean_run_balances_with_no_rerun():
    job = uuid.uuid4()
    result = check({job: done(1)}, [run(job, 1, 10, 11)])
    assert (result.lost, result.reruns, result.unexplained, result.problems) == (0, 0, 0, [])


def test_a_rerun_after_a_done_that_ended_just_before_the_crash_is_a_forgotten_done():
    job = uuid.uuid4()
    result = check({job: done(2)}, [run(job, 1, 99.5, 99.6), run(job, 2, 105, 105.1)])
    assert result.forgotten_dones == 1, "the crash forgot the Done committed at 99.6"
    assert result.reissued_claims == 0, "the claim was kept: the rerun counted a new attempt"
    assert result.problems == [], "a forgotten Done is explained"
    assert result.oldest_forgotten_seconds == pytest.approx(0.4), "it ended 0.4 s before the order"


def test_a_rerun_with_the_same_attempt_number_is_a_reissued_claim_and_its_done_forgotten():
    job = uuid.uuid4()
    runs = [run(job, 1, 99.9, 100.2), run(job, 1, 102, 102.1, lease=OTHER_LEASE)]
    result = check({job: done(1)}, runs)
    assert result.reissued_claims == 1, "attempt 1 was handed out twice: its claim was forgotten"
    assert result.forgotten_dones == 1, "the first run's Done committed before the crash too"
    assert result.reissued_in_flight == 0, "the first run had ended when the server went"
    assert result.problems == []


def test_a_reissued_claim_whose_first_run_outlived_the_crash_is_counted_in_flight():
    job = uuid.uuid4()
    runs = [run(job, 1, 99.9, 101.5), run(job, 1, 102, 102.1, lease=OTHER_LEASE)]
    result = check({job: done(1)}, runs)
    assert (result.reissued_claims, result.reissued_in_flight) == (1, 1)
    assert result.forgotten_dones == 0, "its Done came after the crash and lost its fence"
    assert result.problems == []


def test_a_claim_reissued_under_the_same_lease_is_unexplained():
    job = uuid.uuid4()
    result = check({job: done(1)}, [run(job, 1, 99.9, 100.0), run(job, 1, 102, 102.1)])
    assert result.unexplained == 1, "two runs one settle fence cannot tell apart are a bug"


def test_a_claim_reissued_from_long_before_the_crash_is_unexplained():
    job = uuid.uuid4()
    runs = [run(job, 1, 50, 50.1), run(job, 1, 102, 102.1, lease=OTHER_LEASE)]
    result = check({job: done(1)}, runs)
    assert result.unexplained == 1, "a claim fifty seconds old had been flushed"


def test_a_rerun_after_a_settle_logged_as_failed_is_explained_as_not_landed():
    job = uuid.uuid4()
    runs = [run(job, 1, 99.8, 100.5), run(job, 2, 105, 105.1)]
    result = check({job: done(2)}, runs, not_landed={(job, 1)})
    assert result.settles_not_landed == 1, "the runner said the settle failed"
    assert result.forgotten_dones == 0, "so it is not counted as forgotten"
    assert result.problems == []


def test_a_rerun_after_a_done_long_before_the_crash_is_unexplained():
    job = uuid.uuid4()
    result = check({job: done(2)}, [run(job, 1, 50, 50.1), run(job, 2, 105, 105.1)])
    assert result.unexplained == 1, "no crash forgets a commit fifty seconds old"
    assert result.forgotten_dones == 0


def test_a_rerun_after_a_done_that_ended_after_the_crash_is_unexplained():
    job = uuid.uuid4()
    result = check({job: done(2)}, [run(job, 1, 103, 103.1), run(job, 2, 108, 108.1)])
    assert result.unexplained == 1, "a Done committed after the restart is not forgotten"


def test_an_attempt_number_that_goes_down_is_unexplained():
    job = uuid.uuid4()
    runs = [run(job, 2, 99.8, 99.9), run(job, 1, 102, 102.1, lease=OTHER_LEASE)]
    result = check({job: done(2)}, runs)
    assert result.unexplained >= 1, "a claim never counts an attempt backwards"


def test_a_run_of_an_attempt_above_the_rows_count_is_unexplained():
    job = uuid.uuid4()
    result = check({job: done(1)}, [run(job, 1, 10, 11), run(job, 3, 99.9, 100)])
    assert result.unexplained >= 1, "the row never counted attempt 3"


def test_ledger_lines_parse_into_runs_in_start_order_whatever_the_file_order():
    job = uuid.uuid4()
    lines = [
        f"start 7-2 {job} 1 {OTHER_LEASE} 20.5 job 1",
        f"start 7-1 {job} 1 {LEASE} 10.0 job 1",
        "end 7-1 10.25",
    ]
    runs = parse_ledger(lines)
    assert [(r.started, r.finished, r.lease, r.pid) for r in runs] == [
        (10.0, 10.25, LEASE, 7),
        (20.5, None, OTHER_LEASE, 7),
    ], "runs come back in start order; one never ended has no end"
    assert runs[0].key == "job 1", "a key may hold spaces"


def test_a_ledger_end_without_its_start_is_refused():
    with pytest.raises(ValueError, match="without a start"):
        parse_ledger(["end 7-1 10.0"])


def test_the_handlers_writer_and_the_reader_agree(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path))
    writer = ledger._Writer()
    job = SimpleNamespace(id=uuid.uuid4(), attempts=3, key="job-1", lease_expires_at=None)
    name = writer.started(job)
    writer.ended(name)
    (run_,) = read_ledger(tmp_path)
    assert (run_.job_id, run_.attempt, run_.key, run_.lease) == (job.id, 3, "job-1", "-")
    assert run_.finished is not None, "the run's end is recorded"
    assert run_.finished >= run_.started, "and comes after its start"
