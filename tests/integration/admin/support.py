"""What the admin's tests share: runner rows, and pages read as HTML.

Everything is driven through the Django test client, as an operator's browser
would: pages are read as HTML, actions are POSTed to the changelist.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, RunnerProcess


def make_runner(
    hostname: str,
    kinds: list[str],
    silent_for: timedelta = timedelta(0),
    *,
    pid: int | None = None,
    lane: int = 0,
    lanes: int = 1,
    supervisor_pid: int | None = None,
):
    now = timezone.now()
    return RunnerProcess.objects.create(
        hostname=hostname,
        pid=1000 + RunnerProcess.objects.count() if pid is None else pid,
        lane=lane,
        lanes=lanes,
        supervisor_pid=supervisor_pid,
        version="test",
        started_at=now - timedelta(hours=1),
        heartbeat_at=now - silent_for,
        max_concurrent=4,
        kinds=kinds,
    )


def changelist(client: Client, **params: str) -> str:
    """The job list as HTML, read as text is: without the `<wbr>` marks where
    a long name may wrap (`jobs.admin.display.breakable`)."""
    response = client.get(reverse("admin:jobs_job_changelist"), params)
    assert response.status_code == 200, response.content.decode()[:2000]
    return as_read(response.content.decode())


def as_read(page: str) -> str:
    """`page` without its `<wbr>` marks, which only say where a line may wrap."""
    return page.replace("<wbr>", "")


def rows(page: str) -> list[str]:
    """Each table row of a page, as HTML."""
    return [chunk.split("</tr>")[0] for chunk in page.split("<tr")[1:]]


def act(client: Client, action: str, *rows: Job, **fields: str) -> Any:
    """POST an action for `rows` to the changelist, as the action bar does, and follow.

    `fields` are posted too: `post="yes"` is a confirmation page's "Yes"."""
    return client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": action, "_selected_action": [str(row.id) for row in rows], "index": 0, **fields},
        follow=True,
    )


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]
