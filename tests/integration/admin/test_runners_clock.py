"""The runners page shows a runner's clock skew: one whose machine's clock is
off from the database's by more than `jobs.clock.SKEW_SHOWN_ABOVE` says by how
much under its last heartbeat (it corrects its own time by it); any other
shows nothing more there."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from jobs.models import RunnerProcess
from tests.integration.admin.support import make_runner, rows

pytestmark = pytest.mark.django_db


def heartbeat_cell(page: str, host: str) -> str:
    row = next(row for row in rows(page) if host in row)
    return row.split('class="field-last_heartbeat">')[1].split("</td>")[0]


def test_the_runners_page_shows_a_skew_past_the_bound_and_nothing_for_a_clock_in_step(
    admin_client,
):
    for host, offset_ms in [
        ("ahead-host", -25_000),  # the database is 25 s behind: the runner is ahead
        ("behind-host", 60_000),
        ("close-host", 800),
        ("same-host", 0),
        ("sqlite-host", None),
    ]:
        runner = make_runner(host, ["a"])
        RunnerProcess.objects.filter(pk=runner.pk).update(clock_offset_ms=offset_ms)

    page = admin_client.get(reverse("admin:jobs_runnerprocess_changelist")).content.decode()

    ahead, behind = heartbeat_cell(page, "ahead-host"), heartbeat_cell(page, "behind-host")
    assert ">clock +25.0 s</span>" in ahead
    assert "25.0 s ahead of the database" in ahead, "said in full on hover"
    assert ">clock -60.0 s</span>" in behind
    assert "60.0 s behind the database" in behind
    for host in ("close-host", "same-host", "sqlite-host"):
        assert re.fullmatch(
            r'<span class="jobs-when" title="[^"]+">0 s ago</span>', heartbeat_cell(page, host)
        ), f"{host}: nothing within a second"
