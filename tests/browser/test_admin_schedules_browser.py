"""The Schedules page in a real browser: an operator opens Jobs > Schedules,
disables a schedule through the action form, and sees it disabled; the page
is saved as tests/artifacts/schedules.png, and must fit 1280 px unclipped.

Chromium, the live server and the rule that rows are made before the browser
starts and checked after it closes are as in `tests.browser.test_admin_browser`.
"""

from __future__ import annotations

from datetime import timedelta
from pprint import pformat

from django.contrib.auth.models import User
from django.utils import timezone

from jobs.models import Schedule
from jobs.registry import registry as jobs_registry
from jobs.schedules.reconcile import reconcile
from tests.browser.test_admin_browser import ARTIFACTS, OVERFLOW, chromium_page, log_in
from tests.factories import make_job

SCHEDULES = {
    "nightly": {"kind": "test.record", "cron": "0 2 * * *", "timezone": "Europe/Paris"},
    "pulse": {"kind": "test.sleep", "every": 90},
    "billing.monthly-statements-with-attachments": {
        "kind": "test.record",
        "cron": "30 6 1 * *",
        "timezone": "America/Argentina/Buenos_Aires",
    },
}


def test_an_operator_disables_a_schedule_from_the_schedules_page_and_sees_it_disabled(
    live_server, transactional_db, settings
):
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    settings.JOBS_SCHEDULES = SCHEDULES
    reconcile(jobs_registry)
    fired = timezone.now() - timedelta(hours=20)
    last = make_job("schedule:nightly", state="done", kind="test.record")
    Schedule.objects.filter(name="nightly").update(
        last_fire_at=fired, last_outcome="done", last_job_id=last.id
    )
    Schedule.objects.filter(name="pulse").update(
        last_fire_at=fired,
        last_outcome="skipped",
        enabled=False,
        changed_by="cli:alice",
        changed_at=fired,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "schedules.png"
    screenshot.unlink(missing_ok=True)

    with chromium_page() as page:
        log_in(page, live_server.url, "/admin/jobs/")
        page.get_by_role("link", name="Schedules", exact=True).click()
        page.wait_for_url("**/admin/jobs/schedule/")
        row = page.locator("#result_list tr").filter(
            has=page.locator("input[name=_selected_action][value='nightly']")
        )
        assert "At 02:00 every day" in row.inner_text(), "the expression in words"
        page.check("input[name=_selected_action][value='nightly']")
        page.select_option("select[name=action]", "disable_selected")
        page.click(".actions button[name=index]")
        success = page.locator(".messagelist .success")
        success.wait_for()
        said = success.inner_text()
        enabled = row.locator(".field-enabled img").get_attribute("alt")
        fits = page.evaluate(OVERFLOW)
        page.screenshot(path=screenshot, full_page=True)

    assert said.startswith("Disabled: nightly"), said
    assert enabled == "False", "the row shows the schedule disabled"
    stored = Schedule.objects.get(name="nightly")
    assert (stored.enabled, stored.changed_by) == (False, "admin:ops")
    clipped = fits["scrollWidth"] > fits["clientWidth"] or fits["cells"] or fits["boxes"]
    assert not clipped, f"the page scrolls sideways or clips a column:\n{pformat(fits)}"
    assert screenshot.stat().st_size > 0
