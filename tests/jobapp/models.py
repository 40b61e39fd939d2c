"""Books the tests check: one row per execution and per abandon, from any process."""

from django.db import models


class Execution(models.Model):
    job_id = models.UUIDField()
    key = models.CharField(max_length=255)
    attempt = models.PositiveIntegerField()
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.key} attempt {self.attempt} in {self.pid}"


class Abandonment(models.Model):
    job_id = models.UUIDField()
    key = models.CharField(max_length=255)
    reason = models.TextField()
    pid = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.key}: {self.reason}"
