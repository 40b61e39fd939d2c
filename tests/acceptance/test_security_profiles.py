"""Security: a production settings profile that passes `check --deploy`, each run as a
real `manage.py` process under the project's own settings. The terminal that shows
what a row holds instead of obeying it is tests/integration/cli/test_terminal_escapes.py;
no payload ever reaching eval, pickle or a shell, tests/unit/test_no_eval.py."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def manage(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` in a fresh process under the project's own settings and `env`."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("JOBS_", "SECURE_", "SESSION_", "CSRF_"))
        and name
        not in ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "BENCHMARK_HANDLERS")
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
    assert len(result.stderr.strip().splitlines()) == 1, (
        f"in one line, not a traceback through the settings module:\n{result.stderr}"
    )
    assert result.stderr.startswith("acmeproxy: set the SECRET_KEY environment variable")


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
