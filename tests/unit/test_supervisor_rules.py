"""The supervisor's restart rules (`runjobs --processes`), as pure bookkeeping:
how long a dead child waits before its replacement, and when restarting stops."""

from __future__ import annotations

import signal

from jobs.runner.process import EXIT_HARD_LIMIT
from jobs.runner.restarts import (
    FIRST_DELAY,
    GIVE_UP_AFTER,
    MAX_DELAY,
    STABLE_AFTER,
    START_WINDOW,
    RestartPolicy,
)
from jobs.runner.supervisor import shown_status

QUICK = START_WINDOW / 10  # exited soon after its start
LATE = START_WINDOW + 1  # started fine, exited before it counted as stable


def test_a_child_dying_again_and_again_waits_half_a_second_then_twice_as_long_up_to_30_s():
    policy = RestartPolicy()
    delays = []
    for _ in range(10):
        policy.started_fine()  # never gives up here: each start ran its window
        delays.append(policy.exited(0, LATE, 1).delay)
    assert delays == [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert (FIRST_DELAY, MAX_DELAY) == (0.5, 30)


def test_a_child_that_stayed_up_30_s_is_restarted_after_the_first_delay_again():
    policy = RestartPolicy()
    for _ in range(4):
        policy.exited(0, LATE, 1)
    assert policy.exited(0, STABLE_AFTER, 1).delay == FIRST_DELAY
    assert policy.exited(0, LATE, 1).delay == 2 * FIRST_DELAY, "and doubles from there"


def test_each_child_has_its_own_backoff():
    policy = RestartPolicy()
    for _ in range(3):
        policy.exited(0, LATE, 1)
    assert policy.exited(1, LATE, 1).delay == FIRST_DELAY


def test_a_hard_limit_exit_is_replaced_at_once_and_neither_grows_the_backoff_nor_counts_as_failed():
    policy = RestartPolicy()
    policy.exited(0, QUICK, 1)
    for _ in range(GIVE_UP_AFTER * 2):
        restart = policy.exited(0, QUICK, EXIT_HARD_LIMIT)
        assert (restart.delay, restart.reason, restart.give_up) == (0.0, "hard_limit", False)
    assert policy.exited(0, QUICK, 1).delay == 2 * FIRST_DELAY
    assert policy.failed_starts == 2


def test_the_fifth_child_in_a_row_to_exit_within_10_s_of_its_start_gives_up_across_children():
    policy = RestartPolicy()
    outcomes = [policy.exited(index % 3, QUICK, 1) for index in range(GIVE_UP_AFTER)]
    assert [restart.give_up for restart in outcomes] == [False] * (GIVE_UP_AFTER - 1) + [True]
    assert {restart.reason for restart in outcomes} == {"failed_to_start"}
    assert GIVE_UP_AFTER == 5


def test_a_start_that_ran_its_window_breaks_the_run_of_failed_starts():
    policy = RestartPolicy()
    for _ in range(GIVE_UP_AFTER - 1):
        policy.exited(0, QUICK, 1)
    policy.started_fine()
    assert not policy.exited(0, QUICK, 1).give_up, "the count starts again"
    for _ in range(GIVE_UP_AFTER - 1):
        policy.exited(1, QUICK, 1)
    assert not policy.exited(1, LATE, 0).give_up, "an exit after its window is no failed start"
    assert policy.failed_starts == 0, "and that start ran its window"


def test_a_status_is_shown_as_its_exit_code_or_the_signal_that_killed_it():
    assert [shown_status(0), shown_status(3), shown_status(-signal.SIGKILL)] == [
        "0",
        "3",
        "SIGKILL",
    ]
