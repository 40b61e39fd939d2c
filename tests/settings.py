"""Test settings: the project's, plus `tests.jobapp`, whose handlers record every execution.

Real `runjobs` subprocesses started by the tests use these settings too, so
they find the same handlers.
"""

from acmeproxy.settings import *  # noqa: F403
from acmeproxy.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
