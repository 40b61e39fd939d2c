"""Security: a production settings profile that passes `check --deploy`, a terminal
that shows what a row holds instead of obeying it, and no payload ever reaching
eval, pickle or a shell."""

from __future__ import annotations

import io
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs.models import Job, State
from tests.conftest import ROOT


def manage(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` in a fresh process under the project's own settings and `env`."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("JOBS_", "SECURE_", "SESSION_", "CSRF_"))
        and name not in ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL")
    }
    full_env = {
        **clean,
        "DJANGO_SETTINGS_MODULE": "acmeproxy.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        **env,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_finds_no_issue_in_the_production_profile(tmp_path):
    """DEBUG off with a strong key: every HTTPS setting defaults to its secure value."""
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        tmp_path=tmp_path,
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="jobs.example.com",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"check --deploy passes:\n{output}"
    assert "System check identified no issues (0 silenced)." in output, (
        f"it reports no warning and silences none:\n{output}"
    )


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    result = manage("check", tmp_path=tmp_path, DEBUG="False")
    assert result.returncode != 0, "with DEBUG off and no SECRET_KEY the project does not start"
    assert "SECRET_KEY" in result.stderr, f"and says which variable is missing:\n{result.stderr}"


def test_each_https_setting_can_be_turned_off_by_its_variable(tmp_path):
    """Behind a proxy that terminates TLS and redirects itself, say."""
    result = manage(
        "shell",
        "-c",
        "from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)",
        tmp_path=tmp_path,
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        SECURE_SSL_REDIRECT="False",
        SECURE_HSTS_SECONDS="0",
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == [
        "False",
        "0",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
    ], f"each variable overrides its default: {result.stdout!r}"


def test_the_development_profile_stays_on_plain_http(tmp_path):
    result = manage(
        "shell",
        "-c",
        "from django.conf import settings as s; "
        "print(s.DEBUG, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.SECURE_HSTS_SECONDS)",
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["True", "False", "False", "0"], (
        f"with DEBUG on nothing redirects to HTTPS: {result.stdout!r}"
    )


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


def test_no_code_in_jobs_hands_anything_to_eval_exec_pickle_or_a_shell():
    """A payload is data: it is decoded as JSON and nothing else."""
    forbidden = re.compile(
        r"\b(eval|exec)\(|\bpickle\b|\bmarshal\b|shell\s*=\s*True|os\.system|os\.popen"
        r"|yaml\.load\("
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "jobs").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if forbidden.search(line)
    ]
    assert found == [], f"nothing in jobs/ evaluates, unpickles or shells out: {found}"
