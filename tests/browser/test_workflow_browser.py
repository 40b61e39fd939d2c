"""A workflow's admin page in Chromium at 1280 px (issue 37): a workflow of 50
steps is drawn whole, each step its own box, no two boxes on top of each
other; Cancel asks, and its Yes cancels every step not settled. Screenshots
of the page before and after are kept for people to look at.

Rows are made before the browser starts and checked after it closes
(tests/browser/test_admin_browser.py says why).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from jobs import JobSpec, Workflow
from jobs.models import SETTLED_STATES, Dependency, Job, State
from jobs.workflows.api import Step
from tests.browser.test_admin_browser import ARTIFACTS, OVERFLOW, chromium_page, log_in

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"

#: The boxes' corners as the browser laid them out, and each box's step.
BOXES = """() => [...document.querySelectorAll('svg.jobs-graph a.jobs-node')].map(a => {
  const r = a.querySelector('rect').getBoundingClientRect();
  return {step: a.dataset.step, state: [...a.classList].find(c => c.startsWith('jobs-node-')),
          left: r.left, top: r.top, right: r.right, bottom: r.bottom,
          fill: getComputedStyle(a.querySelector('rect')).fill,
          underlined: getComputedStyle(a).textDecorationLine !== 'none'};
})"""


def fifty_steps() -> tuple[uuid.UUID, set[uuid.UUID]]:
    """An order's images: fetch the order, then per image fetch, resize and
    upload (16 images), then notify: 50 steps, part way through, with a
    failed image whose resize and upload were cancelled."""
    flow = Workflow("order 7731: images")
    order = flow.add(JobSpec.now(FLOW, "order-7731"), name="fetch order 7731")
    uploads, fetches = [], []
    for n in range(16):
        fetched = flow.add(JobSpec.now(FLOW, f"fetch-{n}"), after=[order], name=f"fetch image {n}")
        fetches.append(fetched)
        resized = flow.add(
            JobSpec.now(FLOW, f"resize-{n}"), after=[fetched], name=f"resize image {n} to 3 sizes"
        )
        uploads.append(
            flow.add(JobSpec.now(FLOW, f"upload-{n}"), after=[resized], name=f"upload image {n}")
        )
    first = fetches[0]
    # Also after the first image's fetch: an arrow skipping two layers.
    flow.add(
        JobSpec.now(FLOW, "notify"),
        after=[*uploads, first],
        name="notify the customer by email",
    )
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    now = timezone.now()
    states = {"order-7731": State.DONE, "fetch-14": State.FAILED}
    states |= {f"fetch-{n}": State.DONE for n in range(10)}
    states |= {f"fetch-{n}": State.RUNNING for n in (10, 11, 12, 13)}
    states |= {"fetch-15": State.QUEUED, "resize-14": State.CANCELLED, "upload-14": State.CANCELLED}
    states |= {f"resize-{n}": State.DONE for n in range(6)}
    states |= {f"resize-{n}": State.RUNNING for n in (6, 7)}
    states |= {f"resize-{n}": State.QUEUED for n in (8, 9)}
    states |= {f"upload-{n}": State.DONE for n in range(4)}
    states |= {f"upload-{n}": State.QUEUED for n in (4, 5)}
    for key, state in states.items():
        settled = state in SETTLED_STATES
        Job.objects.filter(workflow_id=workflow_id, key=key).update(
            state=state,
            run_at=now,
            attempts=0 if state in (State.QUEUED, State.CANCELLED) else 1,
            started_at=now - timedelta(seconds=40) if state != State.QUEUED else None,
            finished_at=now - timedelta(seconds=3) if settled else None,
            claimed_by="worker-1:4242" if state == State.RUNNING else "",
            lease_expires_at=now + timedelta(minutes=5) if state == State.RUNNING else None,
            result={"key": key} if state == State.DONE else None,
            last_error="ValueError: no such image" if state == State.FAILED else "",
        )
        if settled:
            dependency = Job.objects.get(workflow_id=workflow_id, key=key).id
            Dependency.objects.filter(depends_on_id=dependency).update(outcome=state)
    ids = set(Job.objects.filter(workflow_id=workflow_id).values_list("id", flat=True))
    assert len(ids) == 50
    return workflow_id, ids


def overlapping(boxes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (a["step"], b["step"])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    ]


def test_a_fifty_step_workflow_is_drawn_whole_at_1280_px_and_cancelled_after_asking(live_server):
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    workflow_id, ids = fifty_steps()
    ARTIFACTS.mkdir(exist_ok=True)
    names = ("page", "top", "graph", "confirm", "cancelled")
    shots = {name: ARTIFACTS / f"workflow-50-{name}.png" for name in names}
    for shot in shots.values():
        shot.unlink(missing_ok=True)
    url = reverse("admin:jobs_workflow", args=[workflow_id])

    with chromium_page(width=1280) as page:
        log_in(page, live_server.url, url)
        graph = page.locator("svg.jobs-graph")
        graph.wait_for()
        boxes = page.evaluate(BOXES)
        frame = graph.evaluate("svg => svg.getBoundingClientRect().toJSON()")
        box = page.locator(".jobs-graph-box")
        scrolls = box.evaluate("el => el.scrollWidth > el.clientWidth + 1")
        label = page.locator("svg.jobs-graph a.jobs-node text").first
        font_size = label.evaluate("t => t.getBoundingClientRect().height")
        rows = page.locator("tr.jobs-step").count()
        fit = page.evaluate(OVERFLOW)
        page.screenshot(path=shots["page"], full_page=True)
        page.screenshot(path=shots["top"])
        box.screenshot(path=shots["graph"])

        page.get_by_role("button", name="Cancel this workflow…").click()
        asked = page.locator(".jobs-workflow-cancel-count").inner_text()
        running_note = page.locator(".jobs-confirm-running").inner_text()
        page.screenshot(path=shots["confirm"])
        page.get_by_role("button", name="Yes, cancel").click()
        page.wait_for_url(f"{live_server.url}{url}")
        message = page.locator(".messagelist .success").inner_text()
        page.screenshot(path=shots["cancelled"], full_page=True)

    assert {b["step"] for b in boxes} == {str(i) for i in ids}, "every step is drawn, once"
    assert len(boxes) == 50
    assert not overlapping(boxes), "no two boxes overlap"
    outside = [
        b["step"]
        for b in boxes
        if b["left"] < frame["left"] - 0.5
        or b["right"] > frame["right"] + 0.5
        or b["top"] < frame["top"] - 0.5
        or b["bottom"] > frame["bottom"] + 0.5
    ]
    assert not outside, "every box is inside the picture"
    assert not scrolls, "50 steps five layers deep fit the page at 1280 px"
    assert fit["scrollWidth"] <= fit["clientWidth"], f"the page fits 1280 px: {fit}"
    assert not fit["cells"], f"no cell's text overflows: {fit['cells']}"
    assert font_size >= 11, f"the names are drawn at a readable size, not {font_size} px"
    assert not any(b["underlined"] for b in boxes), "a box's name is not underlined as links are"
    fills = {b["state"]: b["fill"] for b in boxes}
    assert len(set(fills.values())) == len(fills) == 6, f"each state its own colour: {fills}"
    assert rows == 50, "the table lists every step"
    assert asked == "Cancel 26 steps of workflow order 7731: images"
    assert "A hung synchronous handler ends only with its process" in running_note
    assert message.startswith("Workflow order 7731: images: 26 steps cancelled (6 of them running")
    left = Job.objects.filter(workflow_id=workflow_id).exclude(state__in=SETTLED_STATES)
    assert not left.exists(), "every step not settled was cancelled"
    for shot in shots.values():
        assert shot.stat().st_size > 0


def test_a_chain_runs_down_the_page_and_a_workflow_over_the_limit_is_a_summary_by_layer(
    live_server,
):
    """The graph's two other shapes, kept as screenshots: a chain of 12 steps,
    one column top to bottom; 400 steps, a bar per layer, counted by state."""
    User.objects.create_superuser("ops", "ops@example.com", "a-long-password")
    chain = Workflow("nightly export")
    previous: list[Step] = []
    for n in range(12):
        previous = [
            chain.add(JobSpec.now(FLOW, f"chain-{n}"), after=previous, name=f"export part {n}")
        ]
    chain_id = chain.enqueue()
    wide = Workflow("reindex every shop")
    roots = [wide.add(JobSpec.now(FLOW, f"shop-{n}"), name=f"list shop {n}") for n in range(4)]
    for n in range(396):
        wide.add(JobSpec.now(FLOW, f"page-{n}"), after=[roots[n % 4]], name=f"reindex page {n}")
    wide_id = wide.enqueue()
    assert chain_id is not None
    assert wide_id is not None
    Job.objects.filter(workflow_id=wide_id, key__startswith="shop-").update(state=State.DONE)
    Job.objects.filter(workflow_id=wide_id, key__startswith="page-1").update(state=State.QUEUED)
    shots = {name: ARTIFACTS / f"workflow-{name}-graph.png" for name in ("chain", "summary")}
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium_page(width=1280) as page:
        log_in(page, live_server.url, reverse("admin:jobs_workflow", args=[chain_id]))
        columns = {
            round(x)
            for x in page.locator("svg.jobs-graph a.jobs-node rect").evaluate_all(
                "rects => rects.map(r => r.getBoundingClientRect().left)"
            )
        }
        page.locator(".jobs-graph-box").screenshot(path=shots["chain"])
        page.goto(live_server.url + reverse("admin:jobs_workflow", args=[wide_id]))
        bars = page.locator("svg.jobs-graph-summary g.jobs-band").count()
        boxes = page.locator("svg.jobs-graph a.jobs-node").count()
        note = page.locator(".jobs-graph-summary-note").inner_text()
        fit = page.evaluate(OVERFLOW)
        page.locator(".jobs-workflow-graph").screenshot(path=shots["summary"])

    assert len(columns) == 1, "a chain is drawn in one column"
    assert bars == 2, "a bar per layer"
    assert boxes == 0, "no box per step above the limit"
    assert note.startswith("400 steps in 2 layers")
    assert fit["scrollWidth"] <= fit["clientWidth"], f"the page fits 1280 px: {fit}"
