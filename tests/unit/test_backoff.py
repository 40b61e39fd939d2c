"""The delay before the next attempt: `min(base * 2**(attempt - 1), max)`.

Pacing is the one rule that decides whether a restart after an upstream outage
is a gentle trickle or a stampede, so it is pinned down here without a database.
"""

from datetime import timedelta

import pytest

from jobs.backoff import retry_delay


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def test_the_first_retry_waits_the_base_delay():
    assert retry_delay(1, 30, 3600) == seconds(30), "attempt 1 failing waits exactly the base"


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 30), (2, 60), (3, 120), (4, 240), (5, 480), (6, 960), (7, 1920)],
)
def test_the_delay_is_the_base_doubled_once_per_earlier_attempt(attempt, expected):
    assert retry_delay(attempt, 30, 3600) == seconds(expected), (
        f"attempt {attempt} waits base * 2**{attempt - 1} while below the ceiling"
    )


def test_each_later_retry_waits_twice_the_one_before_until_the_ceiling():
    """Doubling is the rule, whatever the base: checked pairwise, far from any ceiling."""
    for base in (1, 7, 30, 0.25):
        for attempt in range(1, 20):
            assert retry_delay(attempt + 1, base, 10**9) == 2 * retry_delay(attempt, base, 10**9), (
                f"retry {attempt + 1} waits twice retry {attempt} (base {base})"
            )


def test_the_delay_stops_at_the_ceiling_where_doubling_first_passes_it():
    """30 * 2**7 = 3840 is the first doubling past 3600: attempt 8 waits the ceiling."""
    assert retry_delay(7, 30, 3600) == seconds(1920), "below the ceiling the doubling stands"
    assert retry_delay(8, 30, 3600) == seconds(3600), "the first delay past max is cut to max"
    assert retry_delay(9, 30, 3600) == seconds(3600), "and it stays at max afterwards"


def test_no_delay_ever_exceeds_the_ceiling():
    delays = [retry_delay(attempt, 30, 3600) for attempt in range(1, 200)]
    assert max(delays) == seconds(3600), "the ceiling is reached and never passed"
    assert delays == sorted(delays), "a later attempt never waits less than an earlier one"


@pytest.mark.timeout(10)  # an uncapped exponent builds an enormous integer: fail, don't hang
@pytest.mark.parametrize("attempt", [64, 1_000, 10**9, 2**64])
def test_a_huge_attempt_number_waits_the_ceiling_without_overflowing(attempt):
    """A job that has been retried forever must still get a delay, not an exception."""
    assert retry_delay(attempt, 30, 3600) == seconds(3600), (
        f"attempt {attempt} waits the ceiling and does not overflow"
    )
    assert retry_delay(attempt, 0.5, 86_400) == seconds(86_400), (
        "a fractional base saturates at the ceiling too"
    )


@pytest.mark.parametrize("attempt", [1, 2, 10, 10**6])
def test_a_zero_base_retries_at_once_whatever_the_attempt(attempt):
    assert retry_delay(attempt, 0, 3600) == timedelta(0), (
        "a zero base doubles to zero: every retry is immediate"
    )


def test_a_ceiling_equal_to_the_base_makes_every_retry_wait_the_base():
    assert {retry_delay(attempt, 45, 45) for attempt in range(1, 50)} == {seconds(45)}, (
        "with base == max there is no growth at all"
    )


@pytest.mark.parametrize("attempt", [0, -1, -100])
def test_an_attempt_number_below_one_waits_the_base_never_less(attempt):
    assert retry_delay(attempt, 30, 3600) == seconds(30), (
        "a nonsensical attempt count is treated as the first retry, not a shorter one"
    )


def test_a_fractional_base_is_kept_to_the_subsecond():
    assert retry_delay(1, 0.25, 10) == timedelta(milliseconds=250), "the base is not rounded"
    assert retry_delay(3, 0.25, 10) == timedelta(seconds=1), "and it doubles exactly"
