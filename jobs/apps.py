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
        from jobs import checks, sweep  # noqa: F401  (registers the checks and the sweep)
        from jobs.registry import autodiscover

        autodiscover()
