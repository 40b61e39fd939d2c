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

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from pprint import pformat
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from jobs import history
from jobs.admin.display import stamp
from jobs.models import Job, RunnerProcess

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
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[Page]:
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
            page = browser.new_page(viewport={"width": width, "height": height})
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
        log_in(page, live_server.url, "/admin/jobs/job/")
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


def log_in(page: Page, server: str, next_url: str) -> None:
    """Log in as ops through the admin's form, landing on `next_url`."""
    page.goto(f"{server}/admin/login/?next={next_url}")
    page.fill("#id_username", "ops")
    page.fill("#id_password", "a-long-password")
    page.click("input[type=submit]")
    page.wait_for_url(f"{server}{next_url}")


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/orders/jobs.py", line 42, in ship\n'
    "    response = carrier.book(order)\n"
    '  File "/srv/app/carriers/client.py", line 118, in book\n'
    "    raise CarrierUnavailable(status)\n"
    "carriers.client.CarrierUnavailable: 503 from carrier"
)


def five_attempts(now: datetime) -> list[dict[str, object]]:
    """A job's record of five attempts that did not end done, oldest first:
    a retry, a timeout, a reclaim after its runner vanished, a retry with a
    traceback, and the failure that retired it."""
    ends = [
        (history.Outcome.RETRY, "worker-a:101", "HTTP 429 from carrier", "", ""),
        (history.Outcome.TIMED_OUT, "worker-a:101", "overran its 30 s budget", "", ""),
        (history.Outcome.RECLAIMED, "worker-b:202", "worker-b:202 stopped reporting", "", ""),
        (
            history.Outcome.RETRY,
            "worker-c:303 lane 1 of 2",
            "CarrierUnavailable: 503 from carrier",
            "carriers.client.CarrierUnavailable",
            TRACEBACK,
        ),
        (history.Outcome.FAILED, "worker-c:303 lane 1 of 2", "out of attempts", "", ""),
    ]
    stored: list[dict[str, object]] = []
    for attempt, (outcome, runner, error, exception, traceback) in enumerate(ends, start=1):
        started = now - timedelta(minutes=50 - 10 * attempt, seconds=attempt * 7)
        entry = history.record(
            attempt=attempt,
            started_at=started,
            ended_at=started + timedelta(seconds=12),
            runner=runner,
            outcome=outcome,
            error=error,
            exception=exception or None,
            traceback=traceback,
        )
        stored = history.appended(stored, entry)
    return stored


def test_a_jobs_page_shows_its_five_attempts_newest_first_with_times_to_the_millisecond(
    live_server, transactional_db
):
    """The job page as an operator reads it after an incident, saved as a screenshot."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    now = timezone.now().replace(microsecond=0)
    job = Job.objects.create(
        kind="orders.ship",
        key="order-7731",
        state="failed",
        max_attempts=5,
        attempts=5,
        run_at=now - timedelta(minutes=50),
        started_at=now - timedelta(minutes=1),
        finished_at=now,
        last_error=TRACEBACK,
        errors=five_attempts(now),
        claimed_by="worker-c:303 lane 1 of 2",
    )
    entries = job.attempt_history
    screenshot = ARTIFACTS / "job-history.png"
    screenshot.unlink(missing_ok=True)
    url = reverse("admin:jobs_job_change", args=[job.id])

    with chromium_page(width=1440) as page:
        log_in(page, live_server.url, url)
        table = page.locator("table.jobs-history")
        numbers = table.locator("tbody tr td:first-child").all_inner_texts()
        assert numbers == ["5", "4", "3", "2", "1"], "five attempts, newest first"
        started = table.locator("tbody tr td:nth-child(4)").all_inner_texts()
        assert started == [
            stamp(e.started_at, ms=True) for e in reversed(entries) if e.started_at
        ], "each attempt's start, to the millisecond, with the zone"
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", t) for t in started)
        traceback = table.locator("details pre")
        assert not traceback.is_visible(), "a traceback is folded until asked for"
        table.locator("details summary").click()
        assert traceback.is_visible(), "unfolded, the traceback is shown"
        assert "CarrierUnavailable: 503 from carrier" in traceback.inner_text()
        assert "worker-c:303 lane 1 of 2" in page.locator(".field-claimed_by_holder").inner_text()
        page.screenshot(path=screenshot, full_page=True)
    assert screenshot.stat().st_size > 0, "the job page's screenshot was saved"
    # The same job as `manage.py jobs show` prints it, beside the screenshot.
    shown = io.StringIO()
    call_command("jobs", "show", str(job.id)[:8], stdout=shown)
    assert "5 attempts did not end done" in shown.getvalue()
    (ARTIFACTS / "job-history.txt").write_text(shown.getvalue())


#: What a page would clip or scroll sideways: the page itself, any cell of a
#: table whose content is wider than the cell, any box that scrolls sideways,
#: and any badge cut by a box around it.
OVERFLOW = r"""() => {
  const root = document.documentElement;
  const text = el => `${el.tagName.toLowerCase()}.${el.className}: ` +
    el.textContent.trim().replace(/\s+/g, ' ').slice(0, 50);
  const cells = [...document.querySelectorAll('#content td, #content th')]
    .filter(cell => cell.scrollWidth > cell.clientWidth + 1).map(text);
  // A box that hides or scrolls what overflows it, other than a preformatted
  // block (which scrolls by design) and the admin's visually hidden headings.
  const boxes = [...document.querySelectorAll('#content *')].filter(el =>
    ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX)
    && el.scrollWidth > el.clientWidth + 1
    && el.tagName !== 'PRE' && !el.classList.contains('visually-hidden')
  ).map(text);
  const badges = [...document.querySelectorAll('#content .jobs-badge')].filter(badge => {
    if (badge.scrollWidth > badge.clientWidth + 1) return true;
    const rect = badge.getBoundingClientRect();
    for (let el = badge.parentElement; el; el = el.parentElement) {
      if (getComputedStyle(el).overflowX === 'visible') continue;
      const box = el.getBoundingClientRect();
      if (rect.left < box.left - 0.5 || rect.right > box.right + 0.5) return true;
    }
    return rect.right > root.clientWidth;
  }).map(text);
  return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, cells, boxes, badges};
}"""

LONG_KEY = "tenant-4821/invoices/2026-12/customer-9f3a2c7e-5b1d-4e8a-a0c3-" + "x" * 120
LONG_ERROR = "ValueError: " + "the-upstream-said-no-" * 20
LONG_HOST = "worker-pool-eu-west-1a-ip-10-0-112-234.compute.internal.example.com"
LONG_KINDS = ["orders.ship", "orders.refund", "billing.invoice.render", "mail.send.digest"]


def crowded_queue(now: datetime) -> None:
    """Rows whose texts are as long as operators meet them: long keys and errors,
    long runner names, kinds no live runner handles."""
    for n in range(3):
        Job.objects.create(
            kind="billing.invoice.render.monthly-statement-with-attachments",
            key=f"{LONG_KEY}-{n}",
            state="failed",
            max_attempts=5,
            attempts=5,
            run_at=now,
            finished_at=now,
            last_error=LONG_ERROR,
        )
    Job.objects.create(
        kind="orders.ship",
        key=LONG_KEY.replace("/", "-"),
        state="running",
        max_attempts=5,
        attempts=1,
        run_at=now,
        started_at=now,
        lease_expires_at=now + timedelta(minutes=5),
        claimed_by=f"{LONG_HOST}:4242 lane 1 of 2",
    )
    Job.objects.create(
        kind="nobody.handles.this-kind-at-all", key="orphan", max_attempts=5, run_at=now
    )
    for lane in range(2):
        RunnerProcess.objects.create(
            hostname=LONG_HOST,
            pid=4242,
            lane=lane,
            lanes=2,
            version="2026.12.1-rc3+build.4471",
            started_at=now - timedelta(hours=3),
            heartbeat_at=now - timedelta(minutes=lane * 5),
            max_concurrent=16,
            kinds=LONG_KINDS,
            clock_offset_ms=-25_300 if lane else None,  # one runner's clock is 25 s ahead
        )


def test_the_job_list_dashboard_and_runners_page_fit_1280_and_1440_without_clipping(
    live_server, transactional_db
):
    """No column clipped and no sideways scrolling, with long keys, errors and names:
    the job list, the dashboard, the runners page and Cancel's confirmation."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    crowded_queue(timezone.now())
    pages = {
        "job list": "/admin/jobs/job/",
        "dashboard": reverse("admin:jobs_dashboard"),
        "runners": "/admin/jobs/runnerprocess/",
    }
    found: dict[tuple[str, int], dict[str, Any]] = {}
    with chromium_page() as page:
        log_in(page, live_server.url, pages["job list"])
        for width in (1280, 1440):
            page.set_viewport_size({"width": width, "height": 900})
            for name, path in pages.items():
                page.goto(live_server.url + path)
                found[(name, width)] = page.evaluate(OVERFLOW)
            page.goto(live_server.url + pages["job list"])
            page.check("#action-toggle")
            page.select_option("select[name=action]", "cancel")
            page.click(".actions button[name=index]")
            page.locator(".jobs-confirm-skip").wait_for()
            found[("cancel confirmation", width)] = page.evaluate(OVERFLOW)
        page.goto(live_server.url + pages["dashboard"])
        badge = page.locator("#content .jobs-badge-unserved")
        assert badge.inner_text() == "no live runner", "the handler badge reads in full"
    problems = {
        f"the {name} at {width} px": seen
        for (name, width), seen in found.items()
        if seen["scrollWidth"] > seen["clientWidth"]
        or seen["cells"]
        or seen["boxes"]
        or seen["badges"]
    }
    assert not problems, (
        f"a page scrolls sideways, or clips a cell, a box or a badge:\n{pformat(problems)}"
    )


def test_an_operator_pauses_a_queue_in_the_controls_page_and_the_dashboard_says_who(
    live_server, transactional_db
):
    """Pausing as an operator does it: the Controls page's add form, clicked
    through; the dashboard then names the paused queue and who paused it."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "controls.png"
    screenshot.unlink(missing_ok=True)

    with chromium_page() as page:
        log_in(page, live_server.url, "/admin/jobs/control/add/")
        page.select_option("#id_scope", "queue")
        page.fill("#id_name", "emails")
        page.check("#id_paused")
        page.click("input[name=_save]")
        page.wait_for_url(re.compile(r".*/admin/jobs/control/$"))
        listed = page.locator("#result_list").inner_text()
        page.goto(live_server.url + reverse("admin:jobs_dashboard"))
        controls = page.locator(".jobs-controls").inner_text()
        page.screenshot(path=screenshot, full_page=True)

    assert ("emails" in listed, "admin:ops" in listed) == (True, True), listed
    said = tuple(word in controls for word in ("emails", "paused", "admin:ops"))
    assert said == (True, True, True), controls
    assert screenshot.exists()
