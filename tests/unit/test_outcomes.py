"""One vocabulary of how an attempt ended: the attempt record, the `job_finished`
signal, the metrics' label, the span and the admin's badges all use
`jobs.history.Outcome`, and its members still compare as the strings they were."""

from __future__ import annotations

from jobs import signals, tracing
from jobs.admin.attempts import _TONES
from jobs.history import Outcome
from jobs.history_actions import Action


def test_the_signal_tells_every_outcome_but_a_reclaim_in_the_order_it_always_did():
    assert signals.OUTCOMES == ("done", "retry", "failed", "timed_out", "cancelled", "released")
    assert all(isinstance(outcome, Outcome) for outcome in signals.OUTCOMES)
    assert Outcome.RECLAIMED not in signals.OUTCOMES, "a lost attempt's end is only recorded"


def test_a_span_is_an_error_for_the_outcomes_that_are_failures_and_no_others():
    assert {"failed", "timed_out"} == tracing.ERROR_OUTCOMES
    assert set(Outcome) >= tracing.ERROR_OUTCOMES


def test_every_outcome_the_record_keeps_has_a_badge_of_its_own():
    recorded = (set(Outcome) - {Outcome.DONE}) | set(Action)
    assert set(_TONES) == recorded, "no recorded outcome falls back to a borrowed colour"


def test_an_outcome_is_its_string_for_receivers_and_dashboards():
    assert [Outcome.TIMED_OUT] == ["timed_out"]
    assert str(Outcome.DONE) == "done"
    assert f"{Outcome.RELEASED}" == "released"
