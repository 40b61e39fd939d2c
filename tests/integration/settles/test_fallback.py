"""A batch whose statement fails is settled row by row, then the pass claims: one
row the database refuses costs only its own job, and no other job runs twice."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError

from jobs import Done
from jobs.models import State
from jobs.runner import outcomes
from jobs.store.admission import Admission
from tests.integration.runner.support import events
from tests.integration.settles.support import Bad, Good, nested, queue_mixed, rows, vendor

pytestmark = pytest.mark.django_db(transaction=True)


def refused_here() -> Any:
    """A result the database under test refuses (the check would refuse it first)."""
    return {
        "postgresql": {"text": "a\x00b"},  # jsonb has no NUL
        "mysql": nested(32),  # MariaDB's JSON_VALID stops at 31 levels
        "sqlite": nested(2001),  # SQLite's at 2,000
    }[vendor()]


def test_a_result_the_database_refuses_in_a_batch_fails_its_own_job_and_no_other(
    bad, good, registry, make_runner, monkeypatch, caplog
):
    """Past the check (as for a refusal nobody foresaw): the database itself refuses."""
    monkeypatch.setattr(outcomes, "checked", lambda handler, returned: returned)
    bad.ends = lambda: Done(refused_here())
    queue_mixed(20, ["bad"])
    make_runner(registry=registry).drain()

    job = rows(Bad.kind)["bad"]
    assert job.state == State.FAILED, "the refused result fails its own job"
    assert job.last_error.startswith("Bad.run returned a Done whose result the database refused"), (
        job.last_error
    )
    assert bad.runs == [("bad", 1)], "it ran once"
    assert len(bad.abandoned) == 1, "and was abandoned once"
    assert sorted(good.runs) == sorted((f"good-{n}", 1) for n in range(20)), (
        "every good job ran exactly once"
    )
    assert {row.state for row in rows(Good.kind).values()} == {State.DONE}
    assert events(caplog, "job_batch_settle_failed"), "the batch fell back to row by row"
    assert not events(caplog, "job_settle_failed"), "and no settle was lost"


def test_a_batch_whose_statement_fails_settles_each_row_alone_then_the_pass_still_claims(
    good, registry, make_runner, configure, caplog
):
    configure(max_concurrent=4)
    runner = make_runner(registry=registry)
    real = runner.store.settle_and_claim
    calls: list[tuple[int, int, int]] = []  # (rows settled, slots claimed into, pass)

    def fails_once_with_a_batch(done: Any, admission: Admission) -> Any:
        calls.append((len(done), admission.limit, runner.passes))
        if done and len([c for c in calls if c[0]]) == 1:
            raise DatabaseError("the batch's statement failed")
        return real(done, admission)

    runner.store.settle_and_claim = fails_once_with_a_batch
    queue_mixed(12, [])
    runner.drain()

    assert sorted(good.runs) == sorted((f"good-{n}", 1) for n in range(12)), (
        "every job ran exactly once: the failed batch's rows were settled alone"
    )
    assert {row.state for row in rows(Good.kind).values()} == {State.DONE}
    failed_at = next(n for n, (done, _, _) in enumerate(calls) if done)
    settled, limit, in_pass = calls[failed_at + 1]
    assert (settled, in_pass) == (0, calls[failed_at][2]), (
        f"the same pass then claimed, with no batch: {calls}"
    )
    assert limit > 0, "into the slots the batch freed"
    assert len(events(caplog, "job_batch_settle_failed")) == 1
    assert not events(caplog, "job_settle_failed")
