"""The admin's lists read whole at 1280 px with the navigation sidebar open and
at 1920 px: no cell breaks a word (a kind, a key, a runner's name and pid, an
exception's name), nothing is clipped or scrolls sideways, and at 1920 px
the job's panels and the dashboard's chart use the width they are given.

How a split word is found: every run of letters and digits in a cell's text
(`[\\p{L}\\p{N}]+`: "supervisor", "4242", "CarrierUnavailable") is measured as
a DOM Range; a run whose client rects sit on more than one line was broken
inside it. Breaks between runs (after `.`, `/`, `:`, `-` or a space) are
what the admin means to allow. This reads the rendered line boxes, so it
holds whatever CSS or markup made the break, and needs no fixed widths.

Screenshots of every page at both widths are kept in
`tests/artifacts/screenshots/` (git-ignored), named `<page>-<width>.png`.
"""

from __future__ import annotations

from datetime import timedelta
from pprint import pformat
from typing import Any

from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from jobs.models import Control, Job, RunnerProcess
from tests.browser.test_admin_browser import (
    ARTIFACTS,
    TRACEBACK,
    chromium_page,
    crowded_queue,
    five_attempts,
    log_in,
)
from tests.browser.test_dashboard_charts_browser import an_hour_of_counts

SCREENSHOTS = ARTIFACTS / "screenshots"

#: Each word of a table cell split across lines, each cell or box whose
#: content is wider than it (clipped, or scrolled sideways within the page),
#: and whether the page scrolls sideways.
SPLIT_WORDS = r"""(selector) => {
  const where = el => `${el.tagName.toLowerCase()}.${el.className}`;
  const split = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!parent || !parent.getClientRects().length) continue;  // not rendered
      if (parent.closest('details:not([open]) > :not(summary)')) continue;
      for (const match of node.data.matchAll(/[\p{L}\p{N}]+/gu)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()]
          .filter(rect => rect.width > 0).map(rect => Math.round(rect.top)));
        if (lines.size > 1) split.push(`${where(cell)}: ${match[0]}`);
      }
    }
  }
  const clipped = [...document.querySelectorAll(selector)]
    .filter(cell => cell.scrollWidth > cell.clientWidth + 1)
    .map(cell => `${where(cell)}: ${cell.textContent.trim().slice(0, 40)}`);
  // A box that scrolls or hides what is wider than it (the admin's list sits
  // in one that scrolls sideways), other than a preformatted block.
  const scrolled = [...document.querySelectorAll('#content *')].filter(el =>
    ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX)
    && el.scrollWidth > el.clientWidth + 1 && el.tagName !== 'PRE'
    && getComputedStyle(el).clip === 'auto'  // not a heading kept for screen readers
    && !el.classList.contains('visually-hidden')).map(where);
  const root = document.documentElement;
  return {split, clipped, scrolled, sideways: root.scrollWidth > root.clientWidth};
}"""

#: For a failure's message: each column's width, and the boxes the list sits in.
WIDTHS = """() => [
  ...[...document.querySelectorAll('#result_list thead th, .jobs-history thead th')]
    .map(th => `${th.className}: ${Math.round(th.getBoundingClientRect().width)}`),
  ...[...document.querySelectorAll('.results, #changelist-filter, #nav-sidebar, #content')]
    .map(el => `${el.id || el.className}: ${el.clientWidth} of ${el.scrollWidth}`),
]"""

LISTS = "#result_list td, #result_list th"
DETAIL = "#content .jobs-facts td, #content .jobs-history td"


def open_nav_sidebar(page: Any) -> None:
    """Open the admin's navigation sidebar (it remembers its state in localStorage)."""
    page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'true')")
    page.reload()
    assert page.locator("#nav-sidebar").is_visible(), "the navigation sidebar is open"


def test_no_cell_of_the_job_runner_and_control_lists_breaks_a_word_at_1280_and_1920_px(
    live_server, transactional_db
):
    """KIND, KEY and CLAIMED BY (pids), the runners' "supervisor", a control's
    time and an exception's name in a job's history, each whole on its line."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    now = timezone.now()
    crowded_queue(now)
    Job.objects.filter(state="running").update(queue="emails-bulk", priority=-5)
    Control.objects.create(
        scope="queue", name="emails-bulk", paused=True, changed_by="admin:ops", changed_at=now
    )
    Control.objects.create(
        scope="kind",
        name="billing.invoice.render",
        concurrency_limit=4,
        changed_by="cli:deploy-bot",
        changed_at=now,
    )
    RunnerProcess.objects.filter(lane=0).update(supervisor_pid=4200)
    failed = Job.objects.create(
        kind="orders.ship",
        key="order-7731",
        state="failed",
        max_attempts=5,
        attempts=5,
        run_at=now - timedelta(minutes=50),
        finished_at=now,
        last_error=TRACEBACK,
        errors=five_attempts(now),
    )
    pages = {
        "jobs": ("/admin/jobs/job/", LISTS),
        "runners": ("/admin/jobs/runnerprocess/", LISTS),
        "controls": ("/admin/jobs/control/", LISTS),
        "job": (reverse("admin:jobs_job_change", args=[failed.id]), DETAIL),
    }
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    found: dict[str, dict[str, Any]] = {}
    with chromium_page() as page:
        log_in(page, live_server.url, pages["jobs"][0])
        open_nav_sidebar(page)
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 1000})
            for name, (path, cells) in pages.items():
                page.goto(live_server.url + path)
                assert page.locator("#nav-sidebar").is_visible(), f"{name}: the sidebar is open"
                found[f"{name} at {width} px"] = page.evaluate(SPLIT_WORDS, cells)
                found[f"{name} at {width} px"]["widths"] = page.evaluate(WIDTHS)
                page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png", full_page=True)
        headings = (
            page.goto(live_server.url + pages["jobs"][0])
            and page.locator("#result_list thead th").all_inner_texts()
        )
    problems = {
        where: seen
        for where, seen in found.items()
        if seen["split"] or seen["clipped"] or seen["scrolled"] or seen["sideways"]
    }
    assert not problems, f"a word is broken across lines, or clipped:\n{pformat(problems)}"
    assert {"QUEUE", "PRIORITY"} <= {h.strip().upper() for h in headings or []}, (
        f"the job list has a queue and a priority column: {headings}"
    )
    assert all((SCREENSHOTS / f"{name}-{w}.png").exists() for name in pages for w in (1280, 1920))


def test_at_1920_px_the_jobs_panels_and_the_dashboards_chart_use_the_width(
    live_server, transactional_db
):
    """The two panels of a job's facts share the content's width (they took half
    of it, two of four grid tracks), and a queue's live chart spans its box."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    now = timezone.now()
    job = Job.objects.create(kind="orders.ship", key="order-1", max_attempts=5, run_at=now)
    an_hour_of_counts()  # the dashboard draws a queue's charts from its runners' counts
    measured: dict[str, Any] = {}
    with chromium_page(width=1920, height=1000) as page:
        log_in(page, live_server.url, reverse("admin:jobs_job_change", args=[job.id]))
        measured["panels"] = page.evaluate(
            """() => {
              const grid = document.querySelector('.jobs-detail').getBoundingClientRect();
              const panels = [...document.querySelectorAll('.jobs-detail > .module')]
                .slice(0, 2).map(p => p.getBoundingClientRect());
              return {grid: grid.width, right: Math.max(...panels.map(p => p.right)) - grid.left,
                      top: panels.map(p => p.top)};
            }"""
        )
        page.screenshot(path=SCREENSHOTS / "job-1920-panels.png", full_page=True)
        page.goto(live_server.url + reverse("admin:jobs_dashboard"))
        measured["chart"] = page.evaluate(
            """() => ({chart: document.querySelector('.jobs-chart').getBoundingClientRect().width,
                      box: document.querySelector('.jobs-chart-box').clientWidth})"""
        )
    panels, chart = measured["panels"], measured["chart"]
    assert panels["top"][0] == panels["top"][1], "the two panels sit side by side"
    assert panels["right"] >= 0.95 * panels["grid"], (
        f"the two panels span the width ({panels['right']:.0f} of {panels['grid']:.0f} px)"
    )
    assert chart["chart"] >= 0.9 * (chart["box"] - 20), (
        f"the chart spans its box ({chart['chart']:.0f} of {chart['box']} px)"
    )
