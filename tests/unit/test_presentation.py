"""The queue in words (`jobs.presentation`), without a database.

The admin, `manage.py jobs` and the runner's log lines say the same facts
through these functions; the admin and CLI tests prove each screen's output,
and these pin the two wordings side by side, so that a change meant for one
screen cannot reach the other unseen.
"""

import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from jobs import presentation
from jobs.models import State
from jobs.presentation import attempts_not_done, duration, late, next_run, relative, telling_line

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1\n    ValueError: boom  \n'


def job(state: str, **fields: object) -> SimpleNamespace:
    values = {"run_at": NOW, "lease_expires_at": None, "finished_at": None, **fields}
    return SimpleNamespace(state=state, **values)


def test_the_states_spelt_out_are_the_models_own():
    assert (presentation.QUEUED, presentation.RUNNING) == (State.QUEUED, State.RUNNING), (
        "presentation names the states rather than importing them; the names must not drift"
    )


def test_an_errors_telling_line_is_a_reasons_first_and_a_tracebacks_last():
    assert telling_line("\n  boom: no\nmore detail\n") == "boom: no"
    assert telling_line(TRACEBACK) == "ValueError: boom", "the exception, not 'Traceback ...'"
    assert telling_line(TRACEBACK, trim=False) == "    ValueError: boom", (
        "the runner's log lines keep the line as written"
    )
    assert telling_line(" \n\t\n") == "", "an empty error has no telling line"


def _traceback_of(raising: Callable[[], object]) -> str:
    try:
        raising()
    except BaseException as error:
        return "".join(traceback.format_exception(error))
    raise AssertionError("it was meant to raise")


def _multi_line() -> None:
    raise ValueError("boom on attempt 3\nDETAIL: Key (id)=(7) already exists.")


def _noted() -> None:
    error = RuntimeError("boom on attempt 3")
    error.add_note("while relaying order 7")
    raise error


def _chained() -> None:
    try:
        raise KeyError("upstream")
    except KeyError as cause:
        raise RuntimeError("boom on attempt 3") from cause


def _quoting_a_traceback() -> None:
    raise RuntimeError(
        "child failed:\nTraceback (most recent call last):\n  File x\nValueError: no"
    )


def _group() -> None:
    raise ExceptionGroup("two failed", [ValueError(1), TypeError(2)])


def _syntax() -> None:
    compile("x =", "<payload>", "exec")


@pytest.mark.parametrize(
    ("raising", "line"),
    [
        (_multi_line, "ValueError: boom on attempt 3"),
        (_noted, "RuntimeError: boom on attempt 3"),
        (_chained, "RuntimeError: boom on attempt 3"),
        (_quoting_a_traceback, "RuntimeError: child failed:"),
        (_group, "ExceptionGroup: two failed (2 sub-exceptions)"),
        (_syntax, "SyntaxError: invalid syntax"),
    ],
    ids=lambda value: getattr(value, "__name__", "line"),
)
def test_a_tracebacks_telling_line_is_the_raised_exceptions_own_line(raising, line):
    """Not the last line of the text: a message's second line (a driver's
    DETAIL, naming a key), a note, or a traceback a message quotes would be
    taken for it, and retired jobs grouped by it would split by key."""
    text = _traceback_of(raising)
    assert telling_line(text) == line
    assert telling_line(f"gave up after 3 of 3 attempts: {text}") == (
        f"gave up after 3 of 3 attempts: {line}"
    ), "a reason written before the traceback, as rows retired before kept it, is kept"
    assert telling_line(telling_line(text)) == line, "the telling line of a telling line is itself"


def test_a_duration_has_two_units_in_a_shell_and_one_at_a_glance():
    assert [duration(s) for s in (0, 45, 250, 3900, 97200)] == [
        "0s",
        "45s",
        "4m 10s",
        "1h 5m",
        "1d 3h",
    ]
    assert [duration(s, glance=True) for s in (0, 45, 250, 3900, 97200)] == [
        "0 s",
        "45 s",
        "4 min",
        "1 h",
        "1 d",
    ], "at a glance, the largest whole unit alone"
    assert (duration(59.6), duration(59.6, glance=True)) == ("1m", "59 s"), (
        "the shell rounds, the glance cuts down"
    )


def test_a_moment_within_a_second_is_now_in_a_shell_and_never_at_a_glance():
    assert relative(NOW + timedelta(seconds=0.5), NOW) == "now"
    assert relative(NOW, NOW, glance=True) == "0 s ago"
    assert relative(NOW + timedelta(minutes=5), NOW, glance=True) == "in 5 min"
    assert relative(NOW - timedelta(hours=2), NOW) == "2h ago"


def test_a_queued_jobs_next_run_and_whether_it_is_late():
    later = job(State.QUEUED, run_at=NOW + timedelta(minutes=3))
    overdue = job(State.QUEUED, run_at=NOW - timedelta(hours=2))
    assert (next_run(later, NOW), next_run(later, NOW, glance=True)) == ("runs in 3m", "in 3 min")
    assert (next_run(overdue, NOW), next_run(overdue, NOW, glance=True)) == (
        "due 2h ago",
        "overdue 2 h",
    )
    assert (late(later, NOW), late(overdue, NOW)) == (False, True)
    just_due = job(State.QUEUED, run_at=NOW - timedelta(seconds=0.5))
    assert (next_run(just_due, NOW, glance=True), late(just_due, NOW)) == ("due now", False), (
        "less than a second past its run_at is due, not late"
    )


def test_a_waiting_steps_next_run_is_after_its_dependencies_never_its_parked_date():
    waiting = job(State.WAITING, run_at=datetime(9999, 1, 1, tzinfo=UTC))
    assert (next_run(waiting, NOW), next_run(waiting, NOW, glance=True)) == (
        "after its dependencies",
        "after its dependencies",
    )
    assert not late(waiting, NOW)


def test_a_running_jobs_next_run_is_its_lease():
    expired = job(State.RUNNING, lease_expires_at=NOW - timedelta(minutes=4))
    assert next_run(expired, NOW) == "lease expired 4m ago"
    assert next_run(expired, NOW, glance=True) == "lease expired 4 min ago"
    assert late(expired, NOW), "a lease that has run out is late: its runner is likely gone"
    unleased = job(State.RUNNING)
    assert (next_run(unleased, NOW), next_run(unleased, NOW, glance=True)) == (
        "running",
        "running now",
    )


def test_a_settled_jobs_next_run_is_when_it_finished_in_a_shell_and_nothing_at_a_glance():
    done = job(State.DONE, finished_at=NOW - timedelta(minutes=10))
    assert next_run(done, NOW) == "finished 10m ago"
    assert next_run(done, NOW, glance=True) == presentation.NOTHING
    assert not late(done, NOW)


def test_the_attempt_records_heading_counts_every_attempt_and_says_how_many_are_kept():
    assert attempts_not_done(1, 1) == "1 attempt did not end done"
    assert attempts_not_done(5, 5) == "5 attempts did not end done"
    assert attempts_not_done(25, 20) == "25 attempts did not end done; the last 20 are kept"
