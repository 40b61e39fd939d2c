"""The supervisor's restart rules (`runjobs --processes`), as pure bookkeeping:
how long a dead child waits before its replacement, and when restarting stops.

A child that said it was ready to claim and then died was killed by what it
ran; one that died before it said so failed to start."""

from __future__ import annotations

import signal

from jobs.runner.children import shown_status
from jobs.runner.process import EXIT_HARD_LIMIT, EXIT_RECYCLED
from jobs.runner.restarts import (
    FIRST_DELAY,
    GIVE_UP_AFTER,
    MAX_DELAY,
    MAX_READY_DELAY,
    STABLE_AFTER,
    RestartPolicy,
)

QUICK = 0.3  # exited soon after its start
LATE = 11.0  # exited well after its start, before it counted as stable


def test_a_child_dying_before_it_is_ready_waits_half_a_second_then_twice_as_long_up_to_30_s():
    policy = RestartPolicy()
    delays = []
    for _ in range(10):
        policy.started_fine()  # never gives up here: another child became ready between
        delays.append(policy.exited(0, LATE, 1, ready=False).delay)
    assert delays == [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert (FIRST_DELAY, MAX_DELAY) == (0.5, 30)


def test_a_ready_child_killed_again_and_again_is_restarted_within_2_s_and_never_given_up_on():
    policy = RestartPolicy()
    restarts = [policy.exited(index % 2, QUICK, -signal.SIGKILL, ready=True) for index in range(40)]
    assert [restart.delay for restart in restarts[:8]] == [0.5, 0.5, 1, 1, 2, 2, 2, 2]
    assert max(restart.delay for restart in restarts) == MAX_READY_DELAY == 2
    assert {restart.reason for restart in restarts} == {"exited"}
    assert not any(restart.give_up for restart in restarts), "what jobs do never stops it"
    assert policy.failed_starts == 0


def test_a_ready_child_caps_a_backoff_that_failed_starts_had_grown():
    policy = RestartPolicy()
    for _ in range(GIVE_UP_AFTER - 1):
        policy.exited(0, QUICK, 1, ready=False)
    assert policy.exited(0, QUICK, 1, ready=True).delay == MAX_READY_DELAY


def test_a_child_that_stayed_up_30_s_is_restarted_after_the_first_delay_again():
    policy = RestartPolicy()
    for _ in range(4):
        policy.exited(0, LATE, 1, ready=False)
    assert policy.exited(0, STABLE_AFTER, 1, ready=True).delay == FIRST_DELAY
    assert policy.exited(0, LATE, 1, ready=True).delay == 2 * FIRST_DELAY, "and doubles from there"


def test_each_child_has_its_own_backoff():
    policy = RestartPolicy()
    for _ in range(3):
        policy.exited(0, LATE, 1, ready=False)
    assert policy.exited(1, LATE, 1, ready=False).delay == FIRST_DELAY


def test_a_hard_limit_or_recycled_exit_is_replaced_at_once_neither_backing_off_nor_failing():
    policy = RestartPolicy()
    policy.exited(0, QUICK, 1, ready=False)
    for status, reason in ((EXIT_HARD_LIMIT, "hard_limit"), (EXIT_RECYCLED, "recycled")):
        for _ in range(GIVE_UP_AFTER * 2):
            restart = policy.exited(0, QUICK, status, ready=True)
            assert (restart.delay, restart.reason, restart.give_up) == (0.0, reason, False)
    assert policy.exited(0, QUICK, 1, ready=False).delay == 2 * FIRST_DELAY
    assert policy.failed_starts == 2


def test_the_fifth_child_in_a_row_to_exit_before_it_is_ready_gives_up_across_children():
    policy = RestartPolicy()
    outcomes = [policy.exited(index % 3, LATE, 1, ready=False) for index in range(GIVE_UP_AFTER)]
    assert [restart.give_up for restart in outcomes] == [False] * (GIVE_UP_AFTER - 1) + [True]
    assert {restart.reason for restart in outcomes} == {"failed_to_start"}
    assert GIVE_UP_AFTER == 5


def test_a_child_that_becomes_ready_breaks_the_run_of_failed_starts():
    policy = RestartPolicy()
    for _ in range(GIVE_UP_AFTER - 1):
        policy.exited(0, QUICK, 1, ready=False)
    policy.started_fine()
    assert not policy.exited(0, QUICK, 1, ready=False).give_up, "the count starts again"
    for _ in range(GIVE_UP_AFTER - 2):
        assert not policy.exited(1, QUICK, 1, ready=False).give_up
    assert not policy.exited(1, QUICK, 0, ready=True).give_up, (
        "a ready child's exit is no failed start"
    )
    assert policy.failed_starts == GIVE_UP_AFTER - 1, "nor does its exit end the run"


def test_a_status_is_shown_as_its_exit_code_or_the_signal_that_killed_it():
    assert [shown_status(0), shown_status(3), shown_status(-signal.SIGKILL)] == [
        "0",
        "3",
        "SIGKILL",
    ]
