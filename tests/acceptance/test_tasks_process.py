"""Django's tasks framework across processes: a task's result, kept on its row, is
read back from the process that enqueued it after `runjobs` ran it; and the
backend's check in a project that forgot the app."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.jobapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_results_are_visible_from_another_process(runjobs):
    """supports_get_result promises any process; the row is the result store."""
    result = tasks.add.enqueue(20, 22)
    process = runjobs("--burst")
    assert process.wait() == 0, process.output()
    assert tasks.add.get_result(result.id).return_value == 42


def test_check_says_jobs_is_missing_from_installed_apps_when_tasks_names_the_backend(tmp_path):
    """Django's tasks check imports the backend; without the app that import had
    failed on the models (a RuntimeError traceback, or nothing when no task was
    imported yet). It must answer with the check's id and its hint."""
    (tmp_path / "without_jobs.py").write_text(
        "SECRET_KEY = 'test'\n"
        "INSTALLED_APPS = ['django.contrib.contenttypes']\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': ':memory:'}}\n"
        "TASKS = {'default': {'BACKEND': 'jobs.tasks.JobsBackend'}}\n"
    )
    # As a project whose code defines a task has imported django.tasks by then.
    script = (
        "import django; django.setup(); import django.tasks; "
        "from django.core.management import execute_from_command_line; "
        "execute_from_command_line(['manage.py', 'check'])"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "without_jobs",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "TASKS['default']: (jobs.E006)" in done.stderr, done.stderr
    assert 'HINT: Add "jobs" to INSTALLED_APPS' in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, "a check's message, not a crash"
