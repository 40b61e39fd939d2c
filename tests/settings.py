"""Test settings: the project's, plus `tests.jobapp`, whose handlers record every execution.

Real `runjobs` subprocesses started by the tests use these settings too, so
they find the same handlers. The test database is a file (threads and
processes must share it, which an in-memory SQLite cannot), and its name
carries the pytest process id, so two test runs on one machine never share (and destroy) one
database. On PostgreSQL and MySQL/MariaDB it is `test_<NAME>_<pid>` on the same server.
"""

import json
import os

from acmeproxy.settings import *  # noqa: F403
from acmeproxy.settings import BASE_DIR, DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobapp"]
# The tests of the benchmark (tests/integration/bench) run its kinds in this
# process and in the runners they start.
BENCHMARK_HANDLERS = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# A test that must tell SIGHUP from the runner's own config check stretches the check.
JOBS_CONFIG_CHECK_SECONDS = float(os.environ.get("JOBS_CONFIG_CHECK_SECONDS", "1.0"))

_default = DATABASES["default"]
if _default["ENGINE"] == "django.db.backends.sqlite3":
    _default["TEST"] = {"NAME": str(BASE_DIR / f"test_db_{os.getpid()}.sqlite3")}
else:
    _default["TEST"] = {"NAME": f"test_{_default['NAME']}_{os.getpid()}"}

# Real `runjobs` subprocesses get their schedules from the environment (a JSON
# object, as `JOBS_SCHEDULES` takes it); in-process tests use the `settings`
# fixture instead.
JOBS_SCHEDULES = json.loads(os.environ.get("TEST_JOBS_SCHEDULES", "{}"))

# Real `runjobs` subprocesses of the tracing tests export their spans to this
# file, a JSON object a line (tests/acceptance/test_tracing_process.py).
if os.environ.get("TEST_JOBS_SPANS_FILE"):
    from tests.integration.tracing.support import export_spans_to

    export_spans_to(os.environ["TEST_JOBS_SPANS_FILE"])
