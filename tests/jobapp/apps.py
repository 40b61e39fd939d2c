from django.apps import AppConfig


class JobAppConfig(AppConfig):
    name = "tests.jobapp"
    label = "jobapp"
    default_auto_field = "django.db.models.BigAutoField"
