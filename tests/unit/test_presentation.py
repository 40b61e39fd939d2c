"""The queue in words (`jobs.presentation`), without a database.

The admin, `manage.py jobs` and the runner's log lines say the same facts
through these functions; the admin and CLI tests prove each screen's output,
and these pin the two wordings side by side, so that a change meant for one
screen cannot reach the other unseen.
"""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

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
