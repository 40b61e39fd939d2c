"""`queue_name` on a Django task: the job's queue, among the backend's `QUEUES`
as Django documents them, and only names a queue column can hold."""

from __future__ import annotations

import uuid

import pytest
from django.tasks.exceptions import InvalidTask
from django.test import override_settings

from jobs.models import Job
from tests.jobapp import tasks

pytestmark = pytest.mark.django_db


def queues(*names: str):
    return override_settings(
        TASKS={"default": {"BACKEND": "jobs.tasks.JobsBackend", "QUEUES": list(names)}}
    )


def test_a_tasks_queue_name_becomes_its_jobs_queue():
    with queues("default", "emails"):
        result = tasks.add.using(queue_name="emails").enqueue(1, 2)
    assert Job.objects.get(pk=uuid.UUID(result.id)).queue == "emails"


def test_a_task_on_the_default_queue_waits_in_the_default_queue():
    result = tasks.add.enqueue(1, 2)
    assert Job.objects.get(pk=uuid.UUID(result.id)).queue == "default"


def test_a_queue_name_outside_the_backends_queues_is_refused_and_writes_nothing():
    with queues("default"), pytest.raises(InvalidTask, match="emails"):
        tasks.add.using(queue_name="emails").enqueue(1, 2)
    assert not Job.objects.exists()


def test_an_empty_queues_list_lets_any_valid_queue_name_through_as_django_documents():
    with queues():
        result = tasks.add.using(queue_name="anything-at-all").enqueue(1, 2)
    assert Job.objects.get(pk=uuid.UUID(result.id)).queue == "anything-at-all"


def test_a_queue_name_no_queue_column_takes_is_refused_even_when_queues_lists_it():
    with queues("default", "mail queue"), pytest.raises(InvalidTask, match="letters, digits"):
        tasks.add.using(queue_name="mail queue").enqueue(1, 2)
    assert not Job.objects.exists()
