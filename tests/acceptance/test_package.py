"""The wheel, installed into a fresh Django project, runs a job there: the package's promise.

Everything here is a real process, as a user runs it: `pip wheel` builds the
distribution from this repository; a new virtualenv (made with the Python
running the suite) installs it from PyPI's Django alone, or with the
`[postgresql]` extra; `django-admin startproject` makes a project in a
temporary folder, which follows the README's "Add jobs to your project"; and
`manage.py` migrates, enqueues a job of a handler defined in that project,
runs `runjobs --burst` and reads the row back. Nothing from this repository is
on the path: the processes start in the temporary project with no PYTHONPATH,
and each test checks that `jobs` was imported from the virtualenv.

The SQLite story runs in the suite's SQLite pass, the PostgreSQL one in its
PostgreSQL pass (on a scratch database of its own on the same server, dropped
afterwards). Installing needs PyPI, or pip's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

#: Building and installing take tens of seconds, more on a cold pip cache.
pytestmark = pytest.mark.timeout(600)

#: What the wheel installs: Django 6.1 and its own (tzdata on Windows only), and cronsim.
DJANGO = {"django", "asgiref", "sqlparse", "tzdata", "cronsim", "prometheus_client"}

#: The project's own handler and task, as a newcomer would write them.
HANDLER = """
from jobs import Done, JobHandler, register


@register
class Greet(JobHandler):
    kind = "hello.greet"

    def run(self, job):
        print(f"hello, {job.payload['name']}", flush=True)
        return Done({"greeted": job.payload["name"]})
"""

TASK = """
from django.tasks import task


@task
def add(a: int, b: int) -> int:
    return a + b
"""

#: The README's settings for SQLite, appended to startproject's settings.py.
SETTINGS = """
INSTALLED_APPS += ["jobs", "hello"]
DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
TASKS = {"default": {"BACKEND": "jobs.tasks.JobsBackend"}}
"""

ENQUEUE = """
from jobs import JobSpec, enqueue
from hello.tasks import add

assert enqueue(JobSpec.now("hello.greet", "world").with_payload({"name": "world"}))
print(add.enqueue(2, 3).id)
"""

READ_BACK = """
import json
import jobs
from jobs.models import Job
from hello.tasks import add

job = Job.objects.get(kind="hello.greet", key="world")
task = add.get_result("TASK_ID")
print(json.dumps({
    "jobs": jobs.__file__,
    "state": job.state,
    "result": job.result,
    "task": [task.status, task.return_value],
}))
"""

ADMIN = """
import json
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client
from django.test.utils import setup_test_environment

setup_test_environment()
client = Client()
client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
pages = {path: client.get(path) for path in ("/admin/jobs/job/", "/admin/jobs/job/dashboard/")}
print(json.dumps({
    "pages": {path: [page.status_code, "hello.greet" in page.text] for path, page in pages.items()},
    "css": bool(finders.find("jobs/admin.css")),
}))
"""


class Fresh:
    """A virtualenv with the wheel installed, and a `startproject` beside it."""

    def __init__(self, where: Path, wheel: Path, extra: str = "") -> None:
        self.where = where
        #: Every command run and what it printed, for the report.
        self.transcript: list[str] = []
        self.venv, self.project = where / "venv", where / "project"
        self.run([sys.executable, "-m", "venv", str(self.venv)], cwd=where)
        target = f"{wheel}[{extra}]" if extra else str(wheel)
        self.run([self.bin("python"), "-m", "pip", "install", "--quiet", target], cwd=where)
        self.project.mkdir()
        self.run([self.bin("django-admin"), "startproject", "mysite", "."], cwd=self.project)
        self.manage("startapp", "hello")
        (self.project / "hello" / "jobs.py").write_text(HANDLER)
        (self.project / "hello" / "tasks.py").write_text(TASK)

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self) -> dict[str, str]:
        """The user's environment, less anything pointing into this repository or its settings."""
        env = {
            name: value
            for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "VIRTUAL_ENV")
            and not name.startswith("JOBS_")
        }
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(
        self, command: list[str], *, cwd: Path, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        shown = " ".join(Path(part).name if part.startswith("/") else part for part in command)
        self.transcript.append(f"$ {shown}\n{done.stdout}{done.stderr}".rstrip())
        if check:
            assert done.returncode == 0, (
                f"{shown} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run([self.bin("python"), "manage.py", *args], cwd=self.project, check=check)

    def shell(self, code: str) -> str:
        """What `manage.py shell -c code` printed (quietly: no list of automatic imports)."""
        return self.manage("shell", "--verbosity=0", "-c", code).stdout

    def settings(self, text: str) -> None:
        with (self.project / "mysite" / "settings.py").open("a") as settings:
            settings.write(textwrap.dedent(text))

    def installed(self) -> set[str]:
        listed = self.run(
            [self.bin("python"), "-m", "pip", "list", "--format=json"], cwd=self.where
        )
        return {package["name"].lower() for package in json.loads(listed.stdout)}

    def story(self) -> dict[str, object]:
        """Migrate, enqueue a job and a task, `runjobs --burst`, and read both back."""
        self.manage("migrate", "--noinput")
        task_id = self.shell(ENQUEUE).strip()
        runner = self.manage("runjobs", "--burst")
        found = json.loads(self.shell(READ_BACK.replace("TASK_ID", task_id)))
        return {"runner": runner.stdout + runner.stderr, **found}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel --no-deps .`, as the README says, in a folder of its own."""
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, f"pip wheel failed:\n{built.stdout}\n{built.stderr}"
    (found,) = out.glob("django_durable_jobs-*.whl")
    return found


@pytest.fixture(scope="module")
def fresh(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fresh]:
    """A fresh project on SQLite, in a virtualenv holding the wheel and Django alone."""
    if connection.vendor != "sqlite":
        pytest.skip("the fresh SQLite project runs in the suite's SQLite pass")
    project = Fresh(tmp_path_factory.mktemp("fresh-sqlite"), wheel)
    project.settings(SETTINGS)
    yield project
    print("\n\n".join(project.transcript))


def test_the_wheel_holds_the_jobs_app_with_its_templates_static_files_and_migrations(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    top = {name.split("/")[0] for name in names}

    assert {t for t in top if not t.endswith(".dist-info")} == {"jobs"}, (
        f"the wheel holds jobs/ only, never acmeproxy or tests: {sorted(top)}"
    )
    for needed in (
        "jobs/templates/admin/jobs/dashboard.html",
        "jobs/static/jobs/admin.css",
        "jobs/migrations/0001_initial.py",
        "jobs/management/commands/runjobs.py",
        "jobs/py.typed",
    ):
        assert needed in names, f"{needed} is in the wheel"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")], "no bytecode"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the licence ships"
    text = metadata.decode()
    requires = sorted(line for line in text.splitlines() if line.startswith("Requires-Dist:"))
    assert requires == [
        "Requires-Dist: cronsim>=2.6",
        "Requires-Dist: django>=6.1",
        "Requires-Dist: mysqlclient>=2.2.1; extra == 'mysql'",
        "Requires-Dist: opentelemetry-api>=1.20; extra == 'tracing'",
        "Requires-Dist: prometheus-client>=0.20",
        "Requires-Dist: psycopg[binary]>=3.2; extra == 'postgresql'",
    ], "Django, cronsim and prometheus-client are the runtime dependencies; the rest are extras"


def test_the_index_description_is_written_for_a_pip_user_not_for_this_repository(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    description = metadata.decode().split("\n\n", 1)[1]

    assert description.strip() == (ROOT / "PACKAGE.md").read_text().strip(), (
        "the index shows PACKAGE.md"
    )
    assert ".ci/" not in description, "no repository script a pip user does not have"
    assert 'pip install "django-durable-jobs[postgresql]"' in description
    assert "python manage.py runjobs" in description


def test_a_fresh_project_runs_a_job_from_the_wheel_on_sqlite_with_django_alone(fresh):
    assert fresh.installed() - {"pip"} <= {"django-durable-jobs", *DJANGO}, (
        f"a SQLite project installs Django, cronsim and prometheus-client, nothing else: "
        f"{sorted(fresh.installed())}"
    )

    outcome = fresh.story()

    assert str(fresh.venv) in str(outcome["jobs"]), (
        f"jobs came from the virtualenv, not this repository: {outcome['jobs']}"
    )
    assert (outcome["state"], outcome["result"]) == ("done", {"greeted": "world"}), (
        f"the project's job ran and settled done: {outcome}"
    )
    assert outcome["task"] == ["SUCCESSFUL", 5], "the project's @task ran through jobs too"
    runner = str(outcome["runner"])
    assert "hello, world" in runner, "the handler ran inside runjobs"
    assert " INFO jobs runner_started kinds=" in runner, (
        f"with no LOGGING setting the runner is still heard:\n{runner}"
    )
    assert " INFO jobs runner_stopped " in runner, "its last line too"


def test_the_admin_shows_the_jobs_with_the_templates_and_static_files_from_the_wheel(fresh):
    fresh.manage("migrate", "--noinput")

    seen = json.loads(fresh.shell(ADMIN))

    assert seen["pages"] == {
        "/admin/jobs/job/": [200, True],
        "/admin/jobs/job/dashboard/": [200, True],
    }, f"the job list and the dashboard render and show the project's kind: {seen}"
    assert seen["css"], "the admin's stylesheet is found among the static files"


@pytest.mark.parametrize(
    ("engine", "sentence"),
    [
        (
            "django.db.backends.postgresql",
            'jobs needs psycopg for PostgreSQL: pip install "django-durable-jobs[postgresql]"',
        ),
        (
            "django.db.backends.mysql",
            'jobs needs mysqlclient for MySQL/MariaDB: pip install "django-durable-jobs[mysql]"',
        ),
    ],
)
def test_a_project_without_the_extra_reads_one_sentence_naming_it(fresh, engine, sentence):
    """Not Django's traceback ("Error loading psycopg2 or psycopg module"), which came
    first: the models Django imports ask the backend for its features."""
    module = f"settings_{engine.rpartition('.')[2]}"
    (fresh.project / "mysite" / f"{module}.py").write_text(
        "from .settings import *\n"
        f"DATABASES = {{'default': {{'ENGINE': {engine!r}, 'NAME': 'x'}}}}\n"
    )

    for command in (["migrate"], ["runjobs", "--burst"], ["shell", "-c", "pass"]):
        answer = fresh.manage(*command, f"--settings=mysite.{module}", check=False)
        assert (answer.returncode, answer.stdout, answer.stderr) == (1, "", sentence + "\n"), (
            f"manage.py {command[0]} says what to install, in one line"
        )


def test_runjobs_and_jobs_name_the_extra_for_another_database_without_its_driver(fresh):
    """The default database is SQLite and runs; the second, PostgreSQL, lacks psycopg.
    (Django's own checks load every database's backend, so `check` and `migrate`
    stop at Django's traceback for it; the commands that skip those checks say it.)"""
    (fresh.project / "mysite" / "settings_two.py").write_text(
        "from .settings import *\n"
        "DATABASES['reports'] = {'ENGINE': 'django.db.backends.postgresql', 'NAME': 'reports'}\n"
    )
    sentence = 'jobs needs psycopg for PostgreSQL: pip install "django-durable-jobs[postgresql]"'

    for command, verb in (("runjobs", "--burst"), ("jobs", "list")):
        answer = fresh.manage(
            command, "--settings=mysite.settings_two", verb, "--database=reports", check=False
        )
        assert (answer.returncode, answer.stderr) == (1, f"CommandError: {sentence}\n"), (
            f"manage.py {command} --database=reports says what to install, in one line"
        )


# -- PostgreSQL, with the extra -------------------------------------------------------


@pytest.fixture
def scratch_database() -> Iterator[dict[str, object]]:
    """A database of this test's own on the suite's PostgreSQL server, dropped afterwards."""
    import psycopg

    server = {key: connection.settings_dict[key] for key in ("USER", "PASSWORD", "HOST", "PORT")}
    name = f"jobs_package_{os.getpid()}"
    admin = psycopg.connect(
        dbname="postgres",
        user=server["USER"] or None,
        password=server["PASSWORD"] or None,
        host=server["HOST"] or None,
        port=server["PORT"] or None,
        autocommit=True,
    )
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield {"NAME": name, **server}
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgresql
def test_a_fresh_project_runs_a_job_from_the_wheel_on_postgresql_with_the_extra(
    wheel, tmp_path, scratch_database
):
    fresh = Fresh(tmp_path, wheel, extra="postgresql")
    database = {"ENGINE": "django.db.backends.postgresql", **scratch_database}
    fresh.settings(
        f"""
        INSTALLED_APPS += ["jobs", "hello"]
        DATABASES = {{"default": {database!r}}}
        TASKS = {{"default": {{"BACKEND": "jobs.tasks.JobsBackend"}}}}
        """
    )
    try:
        assert {"psycopg", "psycopg-binary"} <= fresh.installed(), "the extra brings psycopg"
        assert "mysqlclient" not in fresh.installed(), "and not MySQL's driver"

        outcome = fresh.story()

        assert str(fresh.venv) in str(outcome["jobs"]), "jobs came from the virtualenv"
        assert (outcome["state"], outcome["result"]) == ("done", {"greeted": "world"}), (
            f"the project's job ran and settled done on PostgreSQL: {outcome}"
        )
        assert outcome["task"] == ["SUCCESSFUL", 5], "the project's @task ran too"
        assert " INFO jobs runner_started " in str(outcome["runner"]), "the runner is heard"
    finally:
        print("\n\n".join(fresh.transcript))
        shutil.rmtree(fresh.venv, ignore_errors=True)


def test_requirements_txt_installs_from_wheels_alone_so_no_build_packages_are_needed(tmp_path):
    """pip refused every source distribution here, as a machine without a
    compiler or the MySQL client headers effectively does: each requirement,
    and each of its dependencies, must come as a wheel for this platform."""
    download = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--dest",
            str(tmp_path),
            "-r",
            str(ROOT / "requirements.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert download.returncode == 0, f"requirements.txt needs a build:\n{download.stderr}"
    assert not [p.name for p in tmp_path.iterdir() if not p.name.endswith(".whl")], "wheels only"
