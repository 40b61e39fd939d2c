"""Security at the terminal: `manage.py jobs` shows what a row holds instead of letting
the terminal obey it."""

from __future__ import annotations

import io

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
