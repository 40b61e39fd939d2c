"""A relay an operator retries after its order went `invalid` is refused, saying why.

The order's client has read `invalid` and been told to place a new order, so
the relay never re-opens it; before, the retried relay settled `done` at once
while the order stayed `invalid`, and the admin showed a success that was not
one. The whole story runs here: the upstream refuses, the order goes
`invalid`, the admin's Retry queues the relay again, and its attempt fails
without asking the upstream.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acmeproxy.orders.jobs import KIND, RelayHandler, relay
from acmeproxy.orders.models import Order, State
from jobs import Failed, enqueue, operations
from jobs.models import Job
from jobs.registry import Registry
from tests.upstream_stub import UpstreamStub

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def upstream(settings) -> Iterator[UpstreamStub]:
    with UpstreamStub() as stub:
        settings.ORDERS_UPSTREAM_URL = stub.url
        yield stub


@pytest.fixture
def relays(registry: Registry) -> Registry:
    registry.register(RelayHandler)
    return registry


def test_a_relay_retried_after_its_order_went_invalid_fails_saying_why_and_asks_nobody(
    upstream, relays, make_runner
):
    upstream.refusal = "the CA will not issue for example.invalid"
    order = Order.objects.create(state=State.PROCESSING)
    assert enqueue(relay(order.pk))
    make_runner(registry=relays).drain()
    order.refresh_from_db()
    assert (order.state, order.reason) == (State.INVALID, upstream.refusal), "the setting"
    job = Job.objects.get(kind=KIND, key=str(order.pk))

    report = operations.retry([job.id])
    assert report.touched == 1, "the queue knows nothing of orders: the relay is queued again"
    make_runner(registry=relays).drain()

    job.refresh_from_db()
    assert job.state == "failed", "a retried relay of an invalid order does not end done"
    assert job.attempts == 1, "one attempt of the fresh budget, refused at once"
    assert f"order {order.pk} is invalid and stays so" in job.last_error, job.last_error
    assert upstream.refusal in job.last_error, "the operator reads what the client was told"
    order.refresh_from_db()
    assert (order.state, order.reason) == (State.INVALID, upstream.refusal), (
        "the order, and what its client reads, are unchanged"
    )
    assert len(upstream.requests_for(order.pk)) == 1, "the upstream was asked once, not again"


def test_the_refusal_names_the_order_and_what_to_do_instead():
    order = Order.objects.create(state=State.INVALID, reason="refused")
    job = Job(kind=KIND, key=str(order.pk), payload={"order_id": order.pk}, attempts=1)

    assert RelayHandler().run(job) == Failed(
        f"order {order.pk} is invalid and stays so (its client was answered: refused); "
        "a new order, not a retried relay, asks again"
    )
