"""The dashboard's live charts from a real `runjobs` process: the runner counts
what it ran per minute and queue and writes it at its heartbeat (last as it
stops), and the dashboard draws it, without counting the jobs table."""

from __future__ import annotations

import re

import pytest
from django.db.models import Sum
from django.urls import reverse

from jobs import JobSpec, enqueue_many
from jobs.models import MinuteCount

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_runner_process_writes_its_minutes_and_the_dashboard_charts_them(runjobs, admin_client):
    specs = [JobSpec.now("test.record", f"r{n}").with_queue("charted") for n in range(12)]
    specs += [JobSpec.now("test.refuse", "no").with_queue("charted")]
    assert all(enqueue_many(specs))

    runner = runjobs("--burst", "--queue", "charted")
    assert runner.wait(timeout=60) == 0, runner.output()

    rows = MinuteCount.objects.filter(queue="charted")
    assert rows.exists(), "the runner wrote its counts before it stopped"
    summed = rows.aggregate(started=Sum("started"), done=Sum("done"), failed=Sum("failed"))
    assert summed == {"started": 13, "done": 12, "failed": 1}, summed
    assert {row.runner.rsplit(":", 1)[1] for row in rows} == {str(runner.pid)}, (
        "the rows are the runner process's own"
    )
    page = admin_client.get(reverse("admin:jobs_dashboard")).content.decode()
    chart = re.search(r'data-queue="charted">(.*?)</div>', page, re.S)
    assert chart is not None, "the queue has its charts"
    assert "13 started, 12 done and 1 failed" in chart.group(1)
