"""A log line shows what a field holds instead of letting the terminal obey it.

A key, a kind's payload-derived text, an error: each comes from callers,
handlers or upstream services, and the runner's log is read in a terminal
(`runjobs` prints it there without a LOGGING setting) and in `journalctl`. An
ESC there drives the terminal; a TAB or a newline forges columns and lines.
The log escapes them with the one function `manage.py jobs` shows rows with.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from jobs import log, presentation
from jobs.cli import text

#: Characters a terminal obeys, or that break a line into columns or lines.
OBEYED = ("\t", "\x1b", "\n", "\r", "\x07", "\x9b", "\u202e", "\u2028", "\x00")


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """The `jobs` logger's lines at INFO and above, as the terminal's format writes them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(log.TERMINAL_FORMAT))
    level = log.logger.level
    log.logger.addHandler(handler)
    log.logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        log.logger.removeHandler(handler)
        log.logger.setLevel(level)


def test_a_key_holding_a_tab_or_an_escape_is_logged_as_its_escapes_never_raw(lines):
    log.event(
        "job_failed",
        logging.WARNING,
        kind="orders.relay",
        key="k\tforged=1\x1b[2J",
        error="boom\nWARNING jobs job_done outcome=done\u202e",
    )

    line = lines.getvalue()
    assert line.count("\n") == 1, f"one event is one line: {line!r}"
    for raw in OBEYED:
        assert raw not in line.rstrip("\n"), f"{raw!r} never reaches the terminal: {line!r}"
    assert ' key="k\\tforged=1\\x1b[2J" ' in line, f"the key is shown, quoted: {line!r}"
    assert 'error="boom\\nWARNING jobs job_done outcome=done\\u202e"' in line, line
    assert " kind=orders.relay " in line, "a plain value is written as it is"


@pytest.mark.parametrize("char", OBEYED, ids=repr)
def test_the_log_escapes_each_character_as_the_jobs_command_shows_it(lines, char):
    """One escaping for the shell and the log, so neither can miss what the other catches."""
    log.event("job_failed", logging.WARNING, key=f"a{char}b")

    assert text.terminal_safe is presentation.terminal_safe, "the CLI's is the shared one"
    assert f'key="{presentation.terminal_safe(f"a{char}b")}"' in lines.getvalue()


def test_a_backslash_written_in_a_value_cannot_pass_for_an_escaped_character(lines):
    """Quoted, a value's own backslashes are doubled: `\\x1b` typed in a key and an
    ESC in it read differently."""
    log.event("job_failed", logging.WARNING, typed="a \\x1b", real="a \x1b", quote='say "hi"')

    line = lines.getvalue()
    assert ' typed="a \\\\x1b" ' in line, line
    assert ' real="a \\x1b" ' in line, line
    assert ' quote="say \\"hi\\""' in line, line


def test_text_with_nothing_to_escape_is_the_same_object_the_fast_path_returns():
    """Log lines are written on the runner's path: text with no control
    character costs one scan in C, and no copy."""
    plain = "orders.relay 42 ünïcödé ✓ 名前"
    assert presentation.terminal_safe(plain) is plain
