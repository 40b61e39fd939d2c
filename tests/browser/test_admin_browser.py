"""The admin as an operator uses it, in a real browser: log in, narrow the job list
to failed jobs, retry one, and look at the dashboard.

The in-process admin tests post forms directly; this one proves the pages
work together when clicked through — the login form, the filter link, the
action checkbox, select and Go button, the message after the redirect — which
a template or URL mistake breaks without any view failing. It drives Debian's
Chromium (`/usr/bin/chromium`, installed by `.ci/run`); Playwright's own
browser downloads are never used. Where Chromium is missing or will not start,
the test skips and says why.

Playwright's sync API keeps an event loop running on this thread while the
browser is open, and Django refuses ORM calls from a thread with a running
loop; so the rows are made before the browser starts and checked after it
closes, while the live server (another thread) does the work in between.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from jobs.models import Job

CHROMIUM = Path("/usr/bin/chromium")
#: Flags for a root user on a machine whose network is closed: without the
#: background-networking ones Chromium keeps trying to reach Google's hosts.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Screenshots for people to look at; the folder is git-ignored.
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@contextmanager
def chromium_page() -> Iterator[Page]:
    """A page in headless Chromium, or a skip saying why there is none."""
    (ARTIFACTS / "failure.png").unlink(missing_ok=True)
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium package)")
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        except PlaywrightError as error:
            pytest.skip(f"{CHROMIUM} would not start: {error.message.splitlines()[0]}")
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(15_000)
            try:
                yield page
            except BaseException:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=ARTIFACTS / "failure.png", full_page=True)
                raise
        finally:
            browser.close()


def test_an_operator_logs_in_retries_a_failed_job_from_the_filtered_list_and_opens_the_dashboard(
    live_server, transactional_db
):
    """The incident path end to end: find what failed, retry it, check the numbers."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    now = timezone.now()
    failed = Job.objects.create(
        kind="test.record",
        key="k1",
        state="failed",
        max_attempts=5,
        attempts=5,
        run_at=now,
        finished_at=now,
        last_error="boom",
    )
    other_failed = Job.objects.create(
        kind="test.record",
        key="k2",
        state="failed",
        max_attempts=5,
        attempts=5,
        run_at=now,
        finished_at=now,
        last_error="bang",
    )
    Job.objects.create(kind="test.record", key="k3", state="queued", max_attempts=5, run_at=now)
    Job.objects.create(
        kind="test.sleep",
        key="k4",
        state="done",
        max_attempts=5,
        attempts=1,
        run_at=now - timedelta(minutes=1),
        started_at=now - timedelta(minutes=1),
        finished_at=now,
    )
    job_list = f"{live_server.url}/admin/jobs/job/"
    dashboard = live_server.url + reverse("admin:jobs_dashboard")
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "dashboard.png"
    screenshot.unlink(missing_ok=True)

    with chromium_page() as page:
        page.goto(f"{live_server.url}/admin/login/?next=/admin/jobs/job/")
        page.fill("#id_username", "ops")
        page.fill("#id_password", "a-long-password")
        page.click("input[type=submit]")
        page.wait_for_url(job_list)
        assert page.locator(f"input[name=_selected_action][value='{failed.id}']").count() == 1, (
            "the job list shows the failed job after logging in"
        )

        state_filter = page.locator("#changelist-filter details").filter(
            has=page.locator("summary", has_text="state")
        )
        state_filter.get_by_role("link", name="failed", exact=True).click()
        page.wait_for_url("**state__exact=failed**")
        listed = page.locator("input[name=_selected_action]")
        assert sorted(listed.evaluate_all("boxes => boxes.map(b => b.value)")) == sorted(
            [str(failed.id), str(other_failed.id)]
        ), "the state filter narrows the list to the failed jobs"

        page.check(f"input[name=_selected_action][value='{failed.id}']")
        page.select_option("select[name=action]", "retry")
        # The action form's submit button: "Go" before Django 6.1, "Run" since.
        page.click(".actions button[name=index]")
        success = page.locator(".messagelist .success")
        success.wait_for()
        assert "Retry" in success.inner_text(), "a success message names the action that ran"

        page.goto(f"{job_list}?state__exact=queued")
        row = page.locator("#result_list tr").filter(
            has=page.locator(f"input[name=_selected_action][value='{failed.id}']")
        )
        assert "queued" in row.inner_text(), "the retried job's row now shows queued"

        response = page.goto(dashboard)
        assert response is not None, f"the browser got an answer from {dashboard}"
        assert response.ok, f"the dashboard at {dashboard} opens (status {response.status})"
        assert "/login/" not in page.url, "the logged-in operator is not sent to log in again"
        assert "queued" in page.locator("#content").inner_text(), (
            "the dashboard shows the counts by state"
        )
        page.screenshot(path=screenshot, full_page=True)

    failed.refresh_from_db()
    other_failed.refresh_from_db()
    assert failed.state == "queued", "the Retry action requeued the selected job"
    assert failed.attempts == 0, "a retried job gets a fresh attempt budget"
    assert other_failed.state == "failed", "the job left unselected is untouched"
    assert screenshot.stat().st_size > 0, "the dashboard's screenshot was saved"
