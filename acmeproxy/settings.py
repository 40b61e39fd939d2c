"""Settings for acmeproxy, read from the environment through django-environ.

Everything a deployment changes comes from a variable: `DATABASE_URL` (SQLite in
the project folder by default), `SECRET_KEY`, `DEBUG`, `ALLOWED_HOSTS`, the
queue's nine `JOBS_*` keys (see `jobs.config`), `JOBS_CONFIG_CHECK_SECONDS`,
and the orders example's `ORDERS_UPSTREAM_URL` and `ORDERS_UPSTREAM_TIMEOUT`.
With `DEBUG=False` the HTTPS settings (`SECURE_SSL_REDIRECT`, `SECURE_HSTS_*`,
`SESSION_COOKIE_SECURE`, `CSRF_COOKIE_SECURE`) default to their secure values,
so `check --deploy` is clean; each may be overridden by its own variable
(README, "Configure").
"""

import os
import sys
from pathlib import Path

import environ

from jobs import config as jobs_config

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env(
    DEBUG=(bool, True),
    ALLOWED_HOSTS=(list, ["localhost", "127.0.0.1", "[::1]"]),
)

DEBUG = env("DEBUG")
# A development key is only acceptable while DEBUG is on; production must say.
# Without one, every command (and the WSGI server) stops with one line and
# status 1, not a traceback through django-environ to say the same.
SECRET_KEY = env("SECRET_KEY", default="dev-only-insecure-key" if DEBUG else "")
if not SECRET_KEY:
    why = "it is empty" if "SECRET_KEY" in os.environ else "DEBUG is off: no development key"
    sys.exit(f"acmeproxy: set the SECRET_KEY environment variable to a secret ({why})")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

# HTTPS hardening. Each defaults to the secure value when DEBUG is off (what
# `manage.py check --deploy` asks for) and to plain HTTP while developing; each
# may be set from its own variable, e.g. SECURE_SSL_REDIRECT=False behind a
# proxy that already redirects. SECURE_PROXY_SSL_HEADER is only for a proxy that
# sets that header itself: `SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https`.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
# A year of HSTS, subdomains included, once DEBUG is off; 0 (off) while developing.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=not DEBUG)
if "SECURE_PROXY_SSL_HEADER" in os.environ:
    SECURE_PROXY_SSL_HEADER = tuple(env.list("SECURE_PROXY_SSL_HEADER"))
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "jobs.apps.JobsAppConfig",
    "acmeproxy.orders",
    "acmeproxy.benchmarks",
]

MIDDLEWARE = [
    # First: it answers the orders API's bad Host in JSON before anything else asks for it.
    "acmeproxy.orders.middleware.JSONErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "acmeproxy.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "acmeproxy.wsgi.application"
ASGI_APPLICATION = "acmeproxy.asgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE makes every transaction take SQLite's write lock at BEGIN, so a
    # claim never deadlocks upgrading a read lock; WAL lets readers (the admin,
    # a web request) proceed while a runner writes; the timeout is how long a
    # writer waits for the lock instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL",
        }
    )

if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    # MySQL and MariaDB build no partial index and Django warns of each one:
    # the jobs migrations add plain indexes there instead (migration 0003),
    # and the orders example's partial index is only an optimisation.
    SILENCED_SYSTEM_CHECKS = ["models.W037"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env("STATIC_ROOT", default=str(BASE_DIR / "staticfiles"))

# The queue's keys (declared in jobs.config); any left out take their declared
# defaults. Each may come from a JOBS_<KEY> variable, e.g. JOBS_MAX_CONCURRENT=16.
JOBS = {
    name: env.int(f"JOBS_{name.upper()}")
    for name in jobs_config.KEYS
    if f"JOBS_{name.upper()}" in os.environ
}

# The orders example's upstream CA. Nothing listens at the default (the discard
# port), so an unconfigured relay retries "connection refused" until its
# attempts run out rather than reaching anything by accident. The timeout bounds
# one whole request, and the relay's lease is written from it.
ORDERS_UPSTREAM_URL = env("ORDERS_UPSTREAM_URL", default="http://127.0.0.1:9/")
ORDERS_UPSTREAM_TIMEOUT = env.float("ORDERS_UPSTREAM_TIMEOUT", default=10.0)

# How often a runner re-reads the config row (1 s unless set; jobs.runner.ticker).
# The instruction budget's counted runners stretch it: under callgrind a second
# of real time is a fiftieth of one at full speed, so the re-reads a drain
# meets would grow with the machine's load (benchmarks.bench.instructions).
if "JOBS_CONFIG_CHECK_SECONDS" in os.environ:
    JOBS_CONFIG_CHECK_SECONDS = env.float("JOBS_CONFIG_CHECK_SECONDS")

# The benchmark app's kinds (bench.*) are served only when asked: `benchjobs`
# asks, for itself and the runners it starts; the example's own runjobs serves
# its orders alone (acmeproxy.benchmarks.jobs).
BENCHMARK_HANDLERS = env.bool("BENCHMARK_HANDLERS", default=False)

# The bearer token Prometheus sends to scrape /metrics/jobs; unset, only a
# signed-in user with the jobs.view_job permission may read it.
JOBS_METRICS_TOKEN = env("JOBS_METRICS_TOKEN", default="")

# Django's tasks framework runs `@task` functions as durable jobs.
TASKS = {"default": {"BACKEND": "jobs.tasks.JobsBackend"}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        # One JSON object per line, for a log collector: JOBS_LOG_FORMAT=json.
        "json": {"()": "jobs.log.JSONFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": env("JOBS_LOG_FORMAT", default="plain"),
        }
    },
    "loggers": {"jobs": {"handlers": ["console"], "level": env("JOBS_LOG_LEVEL", default="INFO")}},
}
