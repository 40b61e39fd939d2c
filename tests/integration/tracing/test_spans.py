"""`jobs.tracing`'s own promises, without a runner: an attempt's span is kept open
past its block until `finished` ends it once with its outcome, or `forget`
ends it without one; each attempt's span is its own."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from jobs import tracing
from jobs.models import Job


def _job(attempts: int = 1, job_id: uuid.UUID | None = None) -> Job:
    return Job(id=job_id or uuid.uuid4(), kind="test.any", queue="default", attempts=attempts)


def _ended(exported) -> list[ReadableSpan]:
    return [span for span in exported.get_finished_spans() if span.name == "jobs.attempt"]


def test_an_attempts_span_stays_open_past_its_block_until_finished_ends_it_once(exported):
    job = _job()
    with tracing.attempt(job):
        pass
    assert _ended(exported) == [], "the handler returned; the outcome is not known yet"
    tracing.finished(job, "done")
    tracing.finished(job, "retry")
    tracing.forget(job)
    [span] = _ended(exported)
    assert span.attributes is not None
    assert span.attributes["outcome"] == "done", "the first settle's outcome, ended once"


@pytest.mark.parametrize("outcome", ["failed", "timed_out"])
def test_an_attempt_that_failed_or_timed_out_ends_its_span_as_an_error(exported, outcome):
    job = _job()
    with tracing.attempt(job):
        pass
    tracing.finished(job, outcome)
    [span] = _ended(exported)
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.status.description == outcome


def test_forget_ends_a_span_whose_settle_was_lost_with_no_outcome(exported):
    job = _job()
    with tracing.attempt(job):
        pass
    tracing.forget(job)
    tracing.forget(job)
    [span] = _ended(exported)
    assert span.attributes is not None
    assert "outcome" not in span.attributes, "nobody knows how a lost attempt ended"


def test_finishing_one_attempt_leaves_the_next_attempt_of_the_same_job_open(exported):
    first = _job(1)
    second = _job(2, first.id)
    with tracing.attempt(first), tracing.attempt(second):
        pass
    tracing.finished(second, "done")
    assert [(span.attributes or {})["attempt"] for span in _ended(exported)] == [2]
    tracing.finished(first, "timed_out")
    assert [(span.attributes or {})["attempt"] for span in _ended(exported)] == [2, 1]


def test_a_span_ended_by_a_timeout_while_its_handler_ran_is_not_written_to_again(exported, caplog):
    """A sync handler past its budget is settled timed out while its thread
    runs on; what it raises later is not written to the ended span (which the
    SDK would refuse with a warning in the runner's log)."""
    job = _job()

    def handler_past_its_budget() -> None:
        with tracing.attempt(job):
            tracing.finished(job, "timed_out")  # the completer's, while the thread runs on
            raise RuntimeError("too late")

    with pytest.raises(RuntimeError):
        handler_past_its_budget()
    [span] = _ended(exported)
    assert [event.name for event in span.events] == []
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")]
    assert warnings == [], "nothing is written to a span after its end"


def test_finished_and_forget_for_an_attempt_that_never_ran_do_nothing(exported):
    tracing.finished(_job(), "cancelled")
    tracing.forget(_job())
    assert _ended(exported) == []
