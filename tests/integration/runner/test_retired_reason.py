"""A retired job's reason is the line that tells what happened; the traceback is
kept in its attempt record only.

The reason is what `abandon` passes on (the orders example to its API's
clients), what `jobs list`, the admin's list and the log lines show, and what
the dead letters group retired jobs by: "gave up after 3 of 3 attempts:
Traceback (most recent call last):" told none of them anything, and handed
server paths to whoever `abandon` informs.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs import Failed, JobSpec, enqueue, retirement, signals
from jobs.models import Job, State
from jobs.store import for_database
from tests.factories import make_job
from tests.integration.runner.support import Recording, events, install, the_job

pytestmark = pytest.mark.django_db(transaction=True)

#: What the row, `abandon`, the signal and the log lines say of the job below.
TOLD = "gave up after 3 of 3 attempts: RuntimeError: boom on attempt 3"


class Booms(Recording):
    kind = "test.booms"

    def outcome(self, job: Job) -> Any:
        try:
            raise KeyError("upstream")
        except KeyError as cause:
            raise RuntimeError(f"boom on attempt {job.attempts}\nupstream said: no") from cause


def listed(*args: str) -> str:
    out = io.StringIO()
    call_command("jobs", *args, stdout=out)
    return out.getvalue()


def test_a_job_out_of_attempts_on_an_exception_tells_its_exceptions_line_and_keeps_the_traceback_in_its_record(  # noqa: E501
    registry, make_runner, configure, caplog
):
    configure(max_attempts=3, retry_base_seconds=0, retry_max_seconds=0)
    handler = install(registry, Booms)
    told: list[str] = []

    def heard(sender: str, job: Job, reason: str, **kwargs: object) -> None:
        told.append(reason)

    signals.job_abandoned.connect(heard, sender=Booms.kind, weak=False)
    try:
        assert enqueue(JobSpec.now(Booms.kind, "k"))
        runner = make_runner(registry=registry)
        with caplog.at_level(logging.INFO, logger="jobs"):
            for _ in range(3):
                runner.drain()
    finally:
        signals.job_abandoned.disconnect(heard, sender=Booms.kind)

    job = the_job(Booms.kind)
    assert (job.state, job.attempts) == (State.FAILED, 3), "the budget ran out on the third"
    assert job.last_error == TOLD, "the row keeps the exception's own line, not the traceback's"
    assert handler.abandoned == [("k", TOLD)], "abandon is told that line, no server paths"
    assert told == [TOLD], "so is the job_abandoned signal"
    [failed] = events(caplog, "job_failed")
    [abandoned] = events(caplog, "job_abandoned")
    assert failed.fields["error"] == TOLD, "job_failed says what was raised"  # type: ignore[attr-defined]
    assert abandoned.fields["reason"] == TOLD, "job_abandoned too"  # type: ignore[attr-defined]
    last = job.attempt_history[-1]
    assert last.error == TOLD, "the record's last entry says the same line"
    assert last.traceback.startswith("Traceback (most recent call last):"), (
        "and keeps the traceback, which is where it is read"
    )
    assert "upstream said: no" in last.traceback, "whole, the message's later lines included"
    assert TOLD in listed("list", "--kind", Booms.kind), "jobs list shows the line"


def test_a_failed_reason_of_several_lines_is_retired_with_its_first_and_kept_whole_in_the_record(
    registry, make_runner
):
    reason = "the CA refused the order: badCSR\ndetail: the key is too short\nrequest id 7"

    class FailsAtLength(Recording):
        kind = "test.fails_at_length"

        def outcome(self, job: Job) -> Any:
            return Failed(reason)

    handler = install(registry, FailsAtLength)
    assert enqueue(JobSpec.now(FailsAtLength.kind, "k"))
    make_runner(registry=registry).drain()

    job = the_job(FailsAtLength.kind)
    first = "the CA refused the order: badCSR"
    assert (job.state, job.last_error) == (State.FAILED, first), "the row keeps one line"
    assert handler.abandoned == [("k", first)], "abandon is told that line"
    assert job.attempt_history[-1].traceback == reason, (
        "the record keeps the reason whole, so nothing the handler said is lost"
    )


#: `last_error` of a job retired before its reason was kept as one line.
OLD_LAST_ERROR = (
    "gave up after 3 of 3 attempts: Traceback (most recent call last):\n"
    '  File "/srv/app/jobs/runner/executor.py", line 120, in run\n'
    "    returned = handler.run(job)\n"
    "RuntimeError: boom on attempt 3\n"
)


def test_a_row_retired_before_reads_with_its_telling_line_and_its_owed_abandon_is_told_it(
    registry, admin_client
):
    """Rows written by an earlier version keep their whole text; every screen
    shows its telling line, and a debt such a process left pays with it."""
    handler = install(registry, Booms)
    job = make_job(
        "old",
        state=State.FAILED,
        kind=Booms.kind,
        last_error=OLD_LAST_ERROR,
        abandon_owed_at=timezone.now(),
    )

    assert TOLD in listed("list", "--kind", Booms.kind), "jobs list shows the telling line"
    page = admin_client.get("/admin/jobs/job/").content.decode()
    assert f'<span class="jobs-error-line" title="{TOLD}">' in page, (
        "so does the admin's last error column"
    )
    assert retirement.pay(for_database(), job, handler, job.last_error, late=True)
    assert handler.abandoned == [("old", TOLD)], "a late abandon is told the line too"
