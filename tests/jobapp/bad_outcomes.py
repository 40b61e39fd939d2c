"""Handlers for the bad-outcomes fault scenario (tests/faults/test_bad_outcomes.py).

Imported at the bottom of `tests.jobapp.jobs`, so autodiscovery registers them
in every `runjobs` process the tests start.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobs import Done, Failed, JobHandler, Reschedule, Retry, register
from jobs.models import Job
from tests.jobapp.jobs import _finish, _record


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


#: Each bad end a handler can come to, by the name a job's payload gives it:
#: what `run` returns, or raises.
BAD_OUTCOMES: dict[str, Any] = {
    "done_nul": lambda: Done({"text": "a\x00b"}),
    "done_lone_surrogate": lambda: Done({"text": "a\ud800b"}),
    "done_not_json": lambda: Done({"ids": {1, 2}}),
    "done_too_deep": lambda: Done(_nested(40)),
    "retry_none": lambda: Retry(None),  # type: ignore[arg-type]
    "failed_none": lambda: Failed(None),  # type: ignore[arg-type]
    "retry_int": lambda: Retry(123),  # type: ignore[arg-type]
    "raise_nul": lambda: _raise("a NUL \x00 in the message"),
    "raise_lone_surrogate": lambda: _raise("a lone surrogate \udfff in the message"),
    "reschedule_negative": lambda: Reschedule(timedelta(hours=-1)),
    "reschedule_zero": lambda: Reschedule(timedelta(0)),
}


def _raise(message: str) -> Any:
    raise RuntimeError(message)


@register
class BadOutcomeHandler(JobHandler):
    """Records the execution, then ends as `BAD_OUTCOMES[payload["bad"]]` says."""

    kind = "test.bad_outcome"

    def run(self, job: Job) -> Any:
        execution = _record(job)
        _finish(execution)
        return BAD_OUTCOMES[job.payload["bad"]]()
