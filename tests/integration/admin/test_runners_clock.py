"""The runners page's "clock" column: a runner whose machine's clock is off from
the database's by more than `jobs.clock.SKEW_SHOWN_ABOVE` says by how much
(it corrects its own time by it); any other shows nothing there."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.models import RunnerProcess
from tests.integration.admin.support import make_runner, rows

pytestmark = pytest.mark.django_db


def clock_cell(page: str, host: str) -> str:
    row = next(row for row in rows(page) if host in row)
    return row.split('class="field-clock">')[1].split("</td>")[0]


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

    assert "column-clock" in page, "the column is there"
    assert ">+25.0 s</span>" in clock_cell(page, "ahead-host")
    assert "25.0 s ahead of the database" in clock_cell(page, "ahead-host"), "said in full"
    assert ">-60.0 s</span>" in clock_cell(page, "behind-host")
    assert "60.0 s behind the database" in clock_cell(page, "behind-host")
    for host in ("close-host", "same-host", "sqlite-host"):
        assert clock_cell(page, host) == "", f"{host}: nothing within a second"
