"""A workflow's failure through a real `runjobs` process: a dependency retired
`failed` cancels the `when="done"` steps after it, down the chain, each
abandoned once, while the `when="settled"` steps after it still run."""

from __future__ import annotations

from collections import Counter

import pytest

from jobs import JobSpec, Workflow
from jobs.models import Job, State
from tests.jobapp.models import Abandonment, Execution

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = "test.flow"


def test_a_failed_step_cancels_its_done_chain_abandoning_each_once_and_its_settled_steps_run(
    runjobs, configure
):
    configure(poll_interval_ms=100)
    flow = Workflow("failing")
    fetch = flow.add(JobSpec.now(FLOW, "fetch").with_payload({"fail": True}).with_max_attempts(1))
    resize = flow.add(JobSpec.now(FLOW, "resize"), after=[fetch])
    flow.add(JobSpec.now(FLOW, "notify"), after=[resize])
    flow.add(JobSpec.now(FLOW, "report"), after=[fetch], when="settled")
    flow.add(JobSpec.now(FLOW, "audit"), after=[resize], when="settled")
    assert flow.enqueue() is not None

    process = runjobs("--burst")
    assert process.wait(60) == 0, process.output()

    states = dict(Job.objects.filter(kind=FLOW).values_list("key", "state"))
    assert states == {
        "fetch": State.FAILED,
        "resize": State.CANCELLED,
        "notify": State.CANCELLED,
        "report": State.DONE,
        "audit": State.DONE,
    }, process.output()
    reasons = dict(Job.objects.filter(kind=FLOW).values_list("key", "last_error"))
    assert "test.flow:fetch" in reasons["resize"], "the cancel names the dependency that failed"
    assert "test.flow:resize" in reasons["notify"], "and down the chain, the step before it"
    abandoned = Counter(Abandonment.objects.values_list("key", flat=True))
    assert abandoned == {"fetch": 1, "resize": 1, "notify": 1}, "abandon once each"
    ran = Counter(Execution.objects.values_list("key", flat=True))
    assert ran == {"fetch": 1, "report": 1, "audit": 1}, "cancelled steps never ran"
