"""Every end of a handler is checked before its settle: what no database stores, or
the runner cannot carry out, is the job's own end, saying why, and never another
job's. Run on each database: each refuses something the others store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from jobs import Done, Failed, Reschedule, Retry
from jobs.handlers import RESULT_MAX_BYTES
from jobs.models import State
from jobs.storable import Unstorable, json_text
from jobs.store import for_database
from jobs.store.admission import Admission
from tests.integration.settles.support import Bad, Good, nested, queue_mixed, rows

pytestmark = pytest.mark.django_db(transaction=True)

GOOD_JOBS = 20


def _raise(message: str) -> Any:
    raise RuntimeError(message)


#: (what `run` does, the state the bad job ends in, what its last error says)
BAD_ENDS = [
    pytest.param(
        lambda: Done({"text": "a\x00b"}),
        State.FAILED,
        "Bad.run returned a Done whose result contains a NUL character",
        id="done-with-a-nul",
    ),
    pytest.param(
        lambda: Done({"a\x00": 1}),
        State.FAILED,
        "whose result contains a NUL character",
        id="done-with-a-nul-in-a-key",
    ),
    pytest.param(
        lambda: Done({"text": "a\ud800b"}),
        State.FAILED,
        "whose result contains a lone surrogate",
        id="done-with-a-lone-surrogate",
    ),
    pytest.param(
        lambda: Done({"ids": {1, 2}}),
        State.FAILED,
        "whose result is not JSON-serialisable: Object of type set",
        id="done-with-a-set",
    ),
    pytest.param(
        lambda: Done({"x": float("nan")}),
        State.FAILED,
        "whose result is not JSON-serialisable",
        id="done-with-nan",
    ),
    pytest.param(
        lambda: Done(nested(32)),
        State.FAILED,
        "whose result is nested more than 31 levels deep",
        id="done-32-deep",
    ),
    pytest.param(
        lambda: Done(nested(5000)),
        State.FAILED,
        "whose result is nested more than 31 levels deep",
        id="done-5000-deep",
    ),
    pytest.param(
        lambda: Done("x" * RESULT_MAX_BYTES),
        State.FAILED,
        f"whose result is {RESULT_MAX_BYTES + 2} bytes of JSON; the limit is {RESULT_MAX_BYTES}",
        id="done-too-large",
    ),
    pytest.param(
        lambda: Retry(None),  # type: ignore[arg-type]
        State.QUEUED,
        "Bad.run returned Retry without a reason",
        id="retry-none",
    ),
    pytest.param(
        lambda: Failed(None),  # type: ignore[arg-type]
        State.FAILED,
        "Bad.run returned Failed without a reason",
        id="failed-none",
    ),
    pytest.param(
        lambda: Retry(123),  # type: ignore[arg-type]
        State.QUEUED,
        "123",
        id="retry-int",
    ),
    pytest.param(
        lambda: Failed(["a", 1]),  # type: ignore[arg-type]
        State.FAILED,
        "['a', 1]",
        id="failed-list",
    ),
    pytest.param(
        lambda: Retry("the upstream said \x00"),
        State.QUEUED,
        "the upstream said \\x00",
        id="retry-reason-with-a-nul",
    ),
    pytest.param(
        lambda: Failed("refused: \ud800"),
        State.FAILED,
        "refused: \\ud800",
        id="failed-reason-with-a-lone-surrogate",
    ),
    pytest.param(
        lambda: _raise("a NUL \x00 in the message"),
        State.QUEUED,
        "RuntimeError: a NUL \\x00 in the message",
        id="raises-with-a-nul",
    ),
    pytest.param(
        lambda: _raise("a lone surrogate \udfff in the message"),
        State.QUEUED,
        "RuntimeError: a lone surrogate \\udfff in the message",
        id="raises-with-a-lone-surrogate",
    ),
    pytest.param(
        lambda: Reschedule(timedelta(hours=-1)),
        State.FAILED,
        "a reschedule's delay must be positive",
        id="reschedule-negative",
    ),
    pytest.param(
        lambda: Reschedule(timedelta(0)),
        State.FAILED,
        "a reschedule's delay must be positive",
        id="reschedule-zero",
    ),
    pytest.param(
        lambda: Reschedule("soon"),  # type: ignore[arg-type]
        State.FAILED,
        "Bad.run returned Reschedule('soon'), whose delay is not a timedelta",
        id="reschedule-not-a-timedelta",
    ),
]


@pytest.mark.parametrize(("end", "state", "says"), BAD_ENDS)
def test_a_bad_end_settles_its_own_job_saying_why_and_costs_no_other_job_a_run(
    bad, good, registry, make_runner, end, state, says
):
    bad.ends = end
    queue_mixed(GOOD_JOBS, ["bad"])
    make_runner(registry=registry).drain()

    job = rows(Bad.kind)["bad"]
    assert job.state == state, f"the bad job settles {state}, not {job.state}"
    assert says in job.last_error, f"its last error says why: {job.last_error!r}"
    assert "\x00" not in job.last_error, "as storable text: no NUL"
    assert job.last_error.encode(), "and no lone surrogate"
    entry = job.attempt_history[-1]
    assert (entry.attempt, entry.outcome) == (1, "failed" if state == State.FAILED else "retry")
    assert "\x00" not in entry.traceback, "the record's traceback is storable too"
    assert bad.runs == [("bad", 1)], "it ran once: no loop, no rerun after a lost settle"
    assert bad.abandoned == ([("bad", job.last_error)] if state == State.FAILED else [])
    assert sorted(good.runs) == sorted((f"good-{n}", 1) for n in range(GOOD_JOBS)), (
        "every good job ran exactly once"
    )
    assert {job.state for job in rows(Good.kind).values()} == {State.DONE}


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(nested(31), id="31-deep"),
        pytest.param({"emoji": "\U0001f600", "accents": "d\u00e9j\u00e0"}, id="past-u+ffff"),
        pytest.param({"text": "\\u0000 and \\ud800, written out"}, id="escapes-written-out"),
        pytest.param("x" * (RESULT_MAX_BYTES - 2), id="exactly-the-limit"),
    ],
)
def test_a_result_at_the_bounds_is_stored_as_it_was_returned(
    bad, good, registry, make_runner, result
):
    bad.ends = lambda: Done(result)
    queue_mixed(2, ["bad"])
    make_runner(registry=registry).drain()
    job = rows(Bad.kind)["bad"]
    assert job.state == State.DONE, job.last_error
    assert job.result == result, "the database gives back what the handler returned"


#: Results one database or another refuses (and a control every one stores).
CANDIDATES = {
    "a NUL": {"t": "\x00"},
    "a lone surrogate": {"t": "\ud800"},
    "32 levels": nested(32),
    "2,001 levels": nested(2001),
    "escapes written out": {"t": "\\u0000 \\ud800"},
}


def test_every_result_this_database_refuses_is_refused_before_its_settle(bad, registry):
    """Written straight to the store, past the check: whatever the database under
    test refuses, the check refuses too (and this database refuses something)."""
    store = for_database()
    queue_mixed(0, list(CANDIDATES))
    now = timezone.now()
    claims = {
        c.job.key: c.job for c in store.claim(Admission(now, {Bad.kind: timedelta(minutes=5)}, 10))
    }
    assert set(claims) == set(CANDIDATES)
    refused = []
    for name, result in CANDIDATES.items():
        try:
            with transaction.atomic():
                store.complete_many([(claims[name], result)], now)
        except Exception:
            refused.append(name)
    assert refused, "the database under test refuses at least one of these"
    assert "escapes written out" not in refused, "the control is stored everywhere"
    for name in refused:
        with pytest.raises(Unstorable):
            json_text(CANDIDATES[name], "result", RESULT_MAX_BYTES)
