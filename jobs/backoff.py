"""The delay before the next attempt: doubling from a base, up to a ceiling;
and when a failed attempt gets no next one.

Pure arithmetic, so the rules about pacing are tested without a database.
"""

from datetime import UTC, datetime, timedelta

# 2**62 seconds is far beyond any ceiling; capping the exponent keeps a job
# with a huge attempt count from building an enormous integer.
_MAX_EXPONENT = 62


def retry_delay(attempt: int, base_seconds: float, max_seconds: float) -> timedelta:
    """The wait after failed attempt number `attempt` (1-based).

    `min(base * 2**(attempt - 1), max)`: the first retry waits `base`, each
    later one twice the one before, never more than `max`.
    """
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    return timedelta(seconds=min(base_seconds * 2**exponent, max_seconds))


#: The latest instant a `datetime` can hold.
LATEST = datetime.max.replace(tzinfo=UTC)


def after(moment: datetime, delay: timedelta) -> datetime | None:
    """`moment + delay`, or None when that is past the latest instant a datetime holds.

    Near year 9999 (a clock or a row far in the future) the sum overflows;
    the caller retires the job with a reason rather than crash its settle and
    leave the row to be claimed again and again.
    """
    try:
        return moment + delay
    except OverflowError:
        return None


def next_attempt(
    attempts: int,
    max_attempts: int,
    deadline: datetime | None,
    now: datetime,
    base_seconds: float,
    max_seconds: float,
) -> tuple[datetime | None, str]:
    """After failed attempt `attempts` at `now`: when the next one is due, and
    why there is none (an empty reason when there is one): the attempt budget
    spent, a deadline before the next attempt, or a date past year 9999."""
    run_at = after(now, retry_delay(attempts, base_seconds, max_seconds))
    if attempts >= max_attempts:
        return run_at, f"gave up after {attempts} of {max_attempts} attempts"
    if run_at is None:
        return None, (
            f"the next attempt would fall past the latest instant a date can hold "
            f"({LATEST.isoformat()})"
        )
    if deadline is not None and run_at >= deadline:
        return run_at, (
            f"deadline {deadline.isoformat()} comes before the next attempt at {run_at.isoformat()}"
        )
    return run_at, ""
