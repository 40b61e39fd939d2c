"""Acting on every job the list's filters match, and redriving a dead-letter group,
clicked through in a real browser: Django's "Select all N jobs", the
confirmation with the number, its Yes, the message; the dead letters page
linked from the list, its "Retry all" with a new budget. Screenshots of both
confirmation pages and the dead letters page at 1280 px are kept as artifacts.

As in test_admin_browser.py, rows are made before the browser starts and
checked after it closes.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.utils import timezone

from jobs.models import Job
from tests.browser.test_admin_browser import ARTIFACTS, chromium_page, log_in

#: More than a page of the list (50), so "select all" reaches rows not shown.
FAILED = 60


def test_an_operator_retries_every_failed_job_of_a_filter_then_redrives_a_dead_letter_group(
    live_server, transactional_db
):
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    now = timezone.now()
    Job.objects.bulk_create(
        Job(
            kind="orders.relay",
            key=f"o{n}",
            state="failed",
            attempts=5,
            max_attempts=5,
            run_at=now,
            finished_at=now,
            last_error="gave up after 5 of 5 attempts: HTTPError: 503 Service Unavailable",
        )
        for n in range(FAILED)
    )
    Job.objects.bulk_create(
        Job(
            kind="mail.send",
            key=f"m{n}",
            state="failed",
            attempts=3,
            max_attempts=3,
            run_at=now,
            finished_at=now,
            last_error="gave up after 3 of 3 attempts: SMTPError: mailbox full",
        )
        for n in range(3)
    )
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium_page() as page:
        log_in(page, live_server.url, "/admin/jobs/job/")
        page.goto(f"{live_server.url}/admin/jobs/job/?kind=orders.relay&state__exact=failed")
        page.check("#action-toggle")
        page.click(".actions .question a")  # "Select all 60 jobs"
        page.select_option("select[name=action]", "retry")
        page.click(".actions button[name=index]")
        heading = page.locator("h2.jobs-bulk-count")
        heading.wait_for()
        assert heading.inner_text() == (
            f"Retry {FAILED} jobs matching kind orders.relay, state failed?"
        ), "the confirmation counts every matching job, not the page's 50"
        page.screenshot(path=ARTIFACTS / "bulk-confirmation.png", full_page=True)
        page.click(f"input[type=submit][value='Yes, retry {FAILED} jobs']")
        success = page.locator(".messagelist .success")
        success.wait_for()
        assert f"{FAILED} queued again with a fresh attempt budget" in success.inner_text()

        page.click(".object-tools a:text('Dead letters')")
        page.wait_for_url("**/dead-letters/")
        row = page.locator("table.jobs-dead-letters tbody tr").filter(has_text="mail.send")
        assert "SMTPError: mailbox full" in row.inner_text()
        page.screenshot(path=ARTIFACTS / "dead-letters.png", full_page=True)
        row.locator("input[name=attempts]").fill("2")
        row.locator("input[type=submit][value='Retry all']").click()
        page.locator("h2.jobs-bulk-count").wait_for()
        page.screenshot(path=ARTIFACTS / "redrive-confirmation.png", full_page=True)
        page.click("input[type=submit][value='Yes, retry 3 jobs']")
        page.locator(".messagelist .success").wait_for()
        assert page.url.endswith("/dead-letters/"), "back to the dead letters"

    assert Job.objects.filter(kind="orders.relay", state="queued").count() == FAILED
    mail = Job.objects.filter(kind="mail.send")
    assert {(job.state, job.attempts, job.max_attempts) for job in mail} == {("queued", 0, 2)}
