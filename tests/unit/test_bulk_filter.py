"""The pure parts of bulk actions and dead letters: reading `--since`, saying a
filter, and the line a retired job is grouped by. No database."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.bulk import Filter, parse_since
from jobs.dead_letters import error_line


@pytest.mark.parametrize(
    ("text", "since"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1.5d", timedelta(hours=36)),
        ("1w", timedelta(days=7)),
        (" 2 h ", timedelta(hours=2)),
    ],
)
def test_since_reads_a_number_and_a_unit(text, since):
    assert parse_since(text) == since


@pytest.mark.parametrize("text", ["", "2", "h", "2 hours", "-2h", "2x", "1e3s", "2h30m", "0s"])
def test_since_refuses_anything_but_a_positive_number_and_one_unit_saying_what_it_wants(text):
    with pytest.raises(ValueError, match=r"must be"):
        parse_since(text)


def test_since_refuses_more_than_ten_years_as_a_mistake():
    with pytest.raises(ValueError, match="at most ten years"):
        parse_since("522w")


def test_a_filter_says_what_it_matches_in_the_words_of_the_options():
    said = str(
        Filter(
            kinds=("orders.relay",),
            states=("failed", "cancelled"),
            since=timedelta(hours=2),
            error_contains="503",
        )
    )
    assert said == (
        "kind orders.relay, state failed or cancelled, changed in the last 2h, "
        "error containing '503'"
    )
    assert str(Filter()) == "every job"


def test_a_retired_job_is_grouped_by_its_error_line_without_the_attempts_it_gave_up_after():
    assert error_line("gave up after 3 of 3 attempts: RuntimeError: boom") == "RuntimeError: boom"
    assert error_line("gave up after 5 of 5 attempts: RuntimeError: boom") == "RuntimeError: boom"


def test_an_older_rows_whole_traceback_groups_by_its_exception_line_like_todays_one_liners():
    old = (
        "gave up after 3 of 3 attempts: Traceback (most recent call last):\n"
        '  File "/srv/app/jobs.py", line 12, in run\n'
        "    raise RuntimeError('boom')\n"
        "RuntimeError: boom\n"
    )
    assert error_line(old) == "RuntimeError: boom"
    assert error_line("Traceback (most recent call last):\n  x\nValueError: bad\n") == (
        "ValueError: bad"
    )


def test_a_cancellation_is_grouped_by_its_reason():
    assert error_line("cancelled by alice") == "cancelled by alice"
    assert error_line("") == ""
