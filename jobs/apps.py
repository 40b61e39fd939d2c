"""`JobsAppConfig`: finds the project's handlers and registers the system checks.

Named `JobsAppConfig` because `JobsConfig` is the name the live-config model
takes.
"""

from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs import checks, sweep, tasks  # noqa: F401  (checks, sweep, task handler)
        from jobs.registry import autodiscover

        autodiscover()
