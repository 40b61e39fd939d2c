"""A Django task queued from a view, inside the view's `transaction.atomic()`,
with a priority and a queue name: the row is written with both when the
request's transaction commits, and not at all when it rolls back."""

from __future__ import annotations

import uuid

import pytest
from django.tasks import task_backends
from django.tasks.signals import task_enqueued
from django.test import override_settings

from jobs.models import Job, State
from jobs.registry import Registry
from jobs.tasks import TaskHandler

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.jobapp.urls"),
]

TASKS = {"default": {"BACKEND": "jobs.tasks.JobsBackend", "QUEUES": ["default", "reports"]}}


@override_settings(TASKS=TASKS)
def test_a_task_queued_from_a_view_keeps_its_priority_and_queue_once_the_request_commits(
    client,
):
    sent = []
    task_enqueued.connect(receiver := lambda sender, task_result, **_: sent.append(task_result))
    try:
        response = client.post("/test/report", {"priority": "40", "queue": "reports"})
    finally:
        task_enqueued.disconnect(receiver)

    assert response.status_code == 200
    job = Job.objects.get(pk=uuid.UUID(response.json()["id"]))
    assert (job.state, job.priority, job.queue) == (State.QUEUED, 40, "reports")
    result = task_backends["default"].get_result(str(job.id))
    assert (result.task.priority, result.task.queue_name) == (40, "reports")
    assert [r.id for r in sent] == [str(job.id)]


@override_settings(TASKS=TASKS)
def test_a_task_queued_from_a_view_whose_transaction_rolls_back_leaves_no_row(client):
    with pytest.raises(RuntimeError, match="after queueing"):
        client.post("/test/report", {"priority": "40", "queue": "reports", "fail": "1"})

    assert not Job.objects.exists()


@override_settings(TASKS=TASKS)
def test_a_runner_serving_the_tasks_queue_runs_the_view_queued_tasks_highest_priority_first(
    client, configure, make_runner
):
    configure(max_concurrent=1)
    ids = {
        priority: client.post("/test/report", {"priority": priority, "queue": "reports"}).json()[
            "id"
        ]
        for priority in ("-20", "60", "0")
    }
    registry = Registry()
    registry.register(TaskHandler)
    runner = make_runner(registry=registry, queues=["reports"])
    order: list[str] = []
    for _ in ids:
        assert runner.run_pass()[0] == 1, "one slot, one claim a pass"
        assert runner.finish(10)
        order += [
            priority
            for priority, job_id in ids.items()
            if priority not in order and Job.objects.get(pk=job_id).state == State.DONE
        ]

    assert order == ["60", "0", "-20"]
