"""The orders example, end to end: why the queue exists.

A client finalizes an order, is answered `processing` at once, and polls. A
real `runjobs` process relays the order to a real HTTP upstream
(`tests.upstream_stub`) that blips, refuses or is not there at all. The
client must see `processing` through every blip and one terminal answer at the
end, and the upstream must never see two requests in flight for one order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from acmeproxy.orders.jobs import KIND
from acmeproxy.orders.models import Order, State
from jobs.models import Job
from tests.conftest import RunJobs
from tests.helpers import create_order, finalize, wait_until
from tests.upstream_stub import certificate_for, unused_url

pytestmark = pytest.mark.django_db(transaction=True)


TERMINAL = ("valid", "invalid")


def start_runjobs(runjobs: Callable[..., RunJobs], upstream_url: str) -> RunJobs:
    return runjobs(env={"ORDERS_UPSTREAM_URL": upstream_url, "ORDERS_UPSTREAM_TIMEOUT": "5"})


def poll_until_settled(
    client, order_id: int, *processes: RunJobs, timeout: float = 12.0
) -> tuple[dict[str, Any], list[tuple[float, str]]]:
    """Poll the order as a client would; its last answer and every (time, state) read."""
    seen: list[tuple[float, str]] = []
    last: dict[str, Any] = {}

    def settled() -> bool:
        last.update(client.get(f"/orders/{order_id}").json())
        seen.append((time.monotonic(), last["state"]))
        return last["state"] in TERMINAL

    assert wait_until(settled, timeout=timeout, step=0.05), (
        f"order {order_id} reached no terminal state within {timeout}s; "
        "runjobs said:\n" + "\n".join(process.output() for process in processes)
    )
    return last, seen


def in_turn(states: list[str]) -> list[str]:
    """The states in the order they were first seen, each run of repeats as one."""
    return [state for n, state in enumerate(states) if n == 0 or states[n - 1] != state]


@pytest.mark.parametrize("failure", ["503", "drop"])
def test_a_client_polling_through_upstream_blips_sees_processing_then_valid(
    client, configure, runjobs, upstream, failure
):
    """The reason the queue exists: a blip is a retry the client never sees."""
    configure(poll_interval_ms=50, retry_base_seconds=1, retry_max_seconds=1, max_attempts=5)
    upstream.failures, upstream.failure = 2, failure
    process = start_runjobs(runjobs, upstream.url)
    order_id = create_order(client)

    assert finalize(client, order_id)["state"] == "processing", (
        "finalize answers processing at once, without waiting for the upstream"
    )
    final, seen = poll_until_settled(client, order_id, process)

    assert final["state"] == "valid", f"the order ends valid once the upstream recovers: {final}"
    assert final["certificate"] == certificate_for(order_id), "the client reads the certificate"
    assert final["reason"] is None, "a valid order carries no reason"
    assert in_turn([state for _, state in seen]) == ["processing", "valid"], (
        "the client saw processing through every blip, then valid, and nothing else"
    )
    requests = upstream.requests_for(order_id)
    blip = "503" if failure == "503" else "dropped"
    assert [r.answer for r in requests] == [blip, blip, "issued"], (
        "the upstream failed twice and the third attempt was issued"
    )
    assert any(
        state == "processing" and requests[0].ended < at < requests[2].started for at, state in seen
    ), "the client polled while the upstream was failing, and read processing"
    assert upstream.most_in_flight(order_id) == 1, "never two requests in flight for one order"


def test_a_stated_refusal_ends_the_order_invalid_with_the_upstreams_reason_after_one_request(
    client, configure, runjobs, upstream
):
    """A refusal is Failed, not Retry: retrying it would only delay the client's answer."""
    configure(poll_interval_ms=50, retry_base_seconds=0, retry_max_seconds=0, max_attempts=5)
    upstream.refusal = "the CA will not issue for example.invalid"
    process = start_runjobs(runjobs, upstream.url)
    order_id = create_order(client)

    assert finalize(client, order_id)["state"] == "processing"
    final, seen = poll_until_settled(client, order_id, process)

    assert final["state"] == "invalid", f"a refusal ends the order invalid: {final}"
    assert final["reason"] == upstream.refusal, "the client reads the upstream's own reason"
    assert final["certificate"] is None, "an invalid order carries no certificate"
    assert in_turn([state for _, state in seen]) == ["processing", "invalid"], (
        "the client saw processing, then one terminal answer"
    )
    assert len(upstream.requests_for(order_id)) == 1, "a stated refusal is asked exactly once"
    job = Job.objects.get(kind=KIND, key=str(order_id))
    assert (job.state, job.attempts) == ("failed", 1), "the relay retired after one attempt"
    assert upstream.most_in_flight(order_id) == 1, "never two requests in flight for one order"


def test_an_upstream_that_never_answers_ends_the_order_invalid_once_the_attempts_run_out(
    client, configure, runjobs
):
    """Connection refused is retried, and only the exhausted budget is terminal."""
    # The budget is frozen onto the job when it is queued, so it is set first.
    configure(poll_interval_ms=50, retry_base_seconds=0, retry_max_seconds=0, max_attempts=2)
    process = start_runjobs(runjobs, unused_url())
    order_id = create_order(client)

    assert finalize(client, order_id)["state"] == "processing"
    final, seen = poll_until_settled(client, order_id, process)

    assert final["state"] == "invalid", f"the order ends invalid when the relay gives up: {final}"
    assert final["reason"].startswith("gave up after 2 of 2 attempts"), (
        f"the reason says the relay gave up: {final['reason']!r}"
    )
    assert final["reason"].endswith("upstream unreachable: Connection refused"), (
        f"the last failure in plain words, no exception's repr: {final['reason']!r}"
    )
    assert in_turn([state for _, state in seen]) == ["processing", "invalid"], (
        "the client saw processing through the retries, then one terminal answer"
    )
    job = Job.objects.get(kind=KIND, key=str(order_id))
    assert (job.state, job.attempts) == ("failed", 2), "both attempts ran before it gave up"
    last = job.attempt_history[-1]
    assert last.exception == "builtins.ConnectionRefusedError", "the history keeps the class"
    assert "ConnectionRefusedError(111" in last.traceback, "and the detail the client is spared"


def test_the_upstream_never_sees_two_requests_in_flight_for_one_order(
    client, configure, runjobs, upstream
):
    """Two runners, repeated finalizes and a slow upstream still ask once at a time per order."""
    configure(poll_interval_ms=50, retry_base_seconds=0, retry_max_seconds=0, max_attempts=5)
    upstream.failures, upstream.delay = 1, 0.3
    order_ids = [create_order(client) for _ in range(3)]
    for order_id in order_ids:
        finalize(client, order_id)
    processes = [start_runjobs(runjobs, upstream.url) for _ in range(2)]
    for order_id in order_ids:
        assert finalize(client, order_id)["state"] in ("processing", "valid"), (
            "a repeated finalize answers the order's current state"
        )

    for order_id in order_ids:
        final, _ = poll_until_settled(client, order_id, *processes)
        assert final["state"] == "valid", f"every order ends valid: {final}"
    for order_id in order_ids:
        assert upstream.most_in_flight(order_id) == 1, (
            f"order {order_id} never had two requests in flight"
        )
        assert [r.answer for r in upstream.requests_for(order_id)] == ["503", "issued"], (
            f"order {order_id} was asked once per attempt, no more"
        )


def test_runjobs_recovers_an_order_left_processing_without_a_job(
    client, configure, runjobs, upstream
):
    """A process that died between its state change and its job leaves nothing stranded."""
    configure(poll_interval_ms=50)
    order = Order.objects.create(state=State.PROCESSING)
    assert not Job.objects.filter(kind=KIND).exists()

    process = start_runjobs(runjobs, upstream.url)
    final, _ = poll_until_settled(client, order.pk, process)

    assert final["state"] == "valid", f"recover queued a relay that finished the order: {final}"
    assert len(upstream.requests_for(order.pk)) == 1, "the recovered relay asked once"
