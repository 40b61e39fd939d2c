"""The dashboard's live charts in Chromium at 1280 and 1920 px: each queue's
counts and wait charts are drawn from the runners' per-minute rows, fit the
page without sideways scrolling, and are kept as screenshots to look at."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from jobs.models import MinuteCount
from tests.browser.test_admin_browser import ARTIFACTS, OVERFLOW, chromium_page, log_in

pytestmark = pytest.mark.django_db(transaction=True)


def an_hour_of_counts() -> None:
    minute = timezone.now().replace(second=0, microsecond=0)
    MinuteCount.objects.bulk_create(
        MinuteCount(
            minute=minute - timedelta(minutes=back),
            queue=queue,
            runner="worker-1:4242",
            started=40 + back % 7 * scale,
            done=38 + back % 7 * scale,
            failed=3 if back % 11 == 0 else 0,
            wait_2=30,
            wait_6=8 + back % 5,
            wait_10=4 if back % 13 == 0 else 0,
        )
        for back in range(60)
        for queue, scale in (("default", 3), ("emails-with-a-rather-long-queue-name", 1))
        if not (queue == "default" and 20 < back < 25)  # a gap: nothing ran
    )


@pytest.mark.parametrize("width", [1280, 1920])
def test_each_queues_live_charts_fit_the_dashboard(live_server, width):
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    an_hour_of_counts()
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / f"dashboard-charts-{width}.png"
    screenshot.unlink(missing_ok=True)
    path = reverse("admin:jobs_dashboard")

    with chromium_page(width=width) as page:
        log_in(page, live_server.url, path)
        charts = page.locator(".jobs-queue-chart")
        queues = charts.evaluate_all("boxes => boxes.map(b => b.dataset.queue)")
        drawn = page.locator(".jobs-queue-chart svg.jobs-chart").evaluate_all(
            "svgs => svgs.map(s => s.getBoundingClientRect().width)"
        )
        fit = page.evaluate(OVERFLOW)
        page.locator(".jobs-live").screenshot(path=screenshot)

    assert queues == ["default", "emails-with-a-rather-long-queue-name"]
    assert len(drawn) == 4, "two charts a queue: counts, and the wait"
    assert all(w > 300 for w in drawn), f"each chart is drawn at a readable width: {drawn}"
    assert fit["scrollWidth"] <= fit["clientWidth"], "the page does not scroll sideways"
    assert screenshot.stat().st_size > 0
