"""`JobsAppConfig`: finds the project's handlers, registers the system checks, and
connects the config row's saves to the runners' wake-up.

Named `JobsAppConfig` because `JobsConfig` is the name the live-config model
takes.
"""

from django.apps import AppConfig
from django.db.models.signals import post_save


class JobsAppConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: these modules import the models,
        # which cannot load before Django has imported every app.
        from jobs import checks, sweep, tasks  # noqa: F401  (checks, sweep, task handler)
        from jobs.models import JobsConfig
        from jobs.registry import autodiscover
        from jobs.wakeup import config_saved

        post_save.connect(config_saved, sender=JobsConfig, dispatch_uid="jobs.wakeup.config_saved")
        autodiscover()
