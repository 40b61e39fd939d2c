"""`JobsAppConfig`: finds the project's handlers, registers the system checks, and
connects the config row's saves to the runners' wake-up.

Named `JobsAppConfig` because `JobsConfig` is the name the live-config model
takes.
"""

from types import ModuleType

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save

from jobs.drivers import missing_driver


class JobsAppConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def __init__(self, app_name: str, app_module: ModuleType | None) -> None:
        super().__init__(app_name, app_module)
        # A project whose default database has no driver jobs can use stops
        # here, with one line saying what to install. This is the last moment
        # to say it: the models Django imports next ask the database's backend
        # for its features, and without a driver at all that fails with
        # Django's own traceback, not naming the extra; with psycopg2 alone
        # Django would run and every enqueue fail.
        problem = missing_driver()
        if problem:
            raise SystemExit(problem)

    def ready(self) -> None:
        # Imported here, not at the top: these modules import the models,
        # which cannot load before Django has imported every app.
        from jobs import checks, lifecycle, sweep, tasks  # noqa: F401  (checks, sweep, tasks)
        from jobs.models import Control, JobsConfig
        from jobs.registry import autodiscover
        from jobs.schedules.hook import hook as schedules
        from jobs.wakeup import config_saved
        from jobs.workflows.hook import hook as workflows

        lifecycle.register(schedules)
        lifecycle.register(workflows)
        post_save.connect(config_saved, sender=JobsConfig, dispatch_uid="jobs.wakeup.config_saved")
        # The operator's controls reach runners as a config change does.
        for signal in (post_save, post_delete):
            signal.connect(config_saved, sender=Control, dispatch_uid=f"jobs.control.{signal}")
        autodiscover()
