"""The delay before the next attempt: doubling from a base, up to a ceiling.

Pure arithmetic, so the one rule about pacing is tested without a database.
"""

from datetime import timedelta

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
