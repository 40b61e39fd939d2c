"""Security at the terminal: `manage.py jobs` shows what a row holds instead of letting
the terminal obey it."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs.models import Job, State


@pytest.mark.django_db
def test_the_jobs_command_prints_control_characters_as_escapes_not_to_the_terminal():
    """A key, payload or error holding an escape sequence is shown, never obeyed."""
    now = timezone.now()
    job = Job.objects.create(
        kind="test.record",
        key="k\x1b[2J",
        payload={"note": "\x9b31m red \u202e"},
        state=State.FAILED,
        attempts=1,
        max_attempts=1,
        run_at=now,
        finished_at=now,
        last_error="upstream said \x1b]0;owned\x07\rdone",
    )
    out = io.StringIO()
    call_command("jobs", "list", stdout=out)
    call_command("jobs", "show", str(job.id), stdout=out)
    text = out.getvalue()
    for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
        assert raw not in text, f"{raw!r} never reaches the terminal"
    assert "k\\x1b[2J" in text, "the key's escape is shown as text"
    assert "\\x1b]0;owned\\x07" in text, "so is the error's"
    assert "\\x9b31m red \\u202e" in text, "and the payload's"


def _printed(*args: str) -> str:
    out = io.StringIO()
    call_command("jobs", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_key_holding_a_newline_is_listed_on_one_line_with_the_newline_escaped():
    """A newline printed raw would start a line that reads as another job's row."""
    forged = "00000000-0000-0000-0000-000000000000  done  test.record  forged"
    job = Job.objects.create(
        kind="test.record", key=f"k1\n{forged}\tend", max_attempts=5, run_at=timezone.now()
    )

    lines = _printed("list").splitlines()

    assert len(lines) == 2, f"a header and one row, nothing forged:\n{lines}"
    assert lines[1].startswith(str(job.id))
    assert f"k1\\n{forged}\\tend" in lines[1], "the newline and the tab are shown as escapes"


@pytest.mark.django_db
def test_show_and_stats_print_every_field_on_one_line_however_many_newlines_it_holds():
    now = timezone.now()
    job = Job.objects.create(
        kind="test.record\nRunners: none",
        key="k1\nstate: done",
        payload={"note": "a\nb\u2028c"},
        max_attempts=5,
        run_at=now,
        last_error="first line\r\nsecond\x0bline",
    )

    shown = _printed("show", str(job.id))
    stats = _printed("stats")

    assert len(re.findall(r"^state:", shown, re.M)) == 1, (
        "the key's newline starts no line that passes for the state"
    )
    assert re.search(r"^key:\s+k1\\nstate: done$", shown, re.M), shown
    assert re.search(r"^kind:\s+test\.record\\nRunners: none$", shown, re.M), shown
    assert '    "note": "a\\nb\\u2028c"' in shown.splitlines(), "the payload: one JSON line a key"
    error = shown.split("\nlast_error:", 1)[1].splitlines()[1:3]
    assert error == ["  first line", "  second\\x0bline"], (
        "last_error keeps its own lines, indented, and only those"
    )
    assert len(re.findall(r"^Runners:", stats, re.M)) == 1, "the kind starts no line of stats"
    assert "test.record\\nRunners: none" in stats


@pytest.mark.django_db
def test_printable_text_in_any_script_is_shown_as_written():
    key = "café 注文 😀 \u00a0nbsp"
    Job.objects.create(kind="test.record", key=key, max_attempts=5, run_at=timezone.now())

    assert key in _printed("list"), "only what a terminal would obey is escaped"
