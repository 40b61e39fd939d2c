"""What the orders API tells a client when its relay gave up on an exception: the
line that says what was raised, never the runner's traceback with its server
paths (the reason `abandon` is told is what the client reads)."""

from __future__ import annotations

import pytest

from acmeproxy.orders import upstream
from acmeproxy.orders.jobs import RelayHandler, relay
from acmeproxy.orders.models import Order, State
from jobs import enqueue
from jobs.registry import Registry

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_relay_that_raised_until_it_gave_up_tells_the_client_what_was_raised_in_one_line(
    registry: Registry, make_runner, configure, monkeypatch, client
):
    configure(max_attempts=1)

    def broken(order_id: int) -> upstream.Answer:
        raise RuntimeError(f"the certificate store is read-only (order {order_id})")

    monkeypatch.setattr(upstream, "request_certificate", broken)
    registry.register(RelayHandler)
    order = Order.objects.create(state=State.PROCESSING)
    assert enqueue(relay(order.pk))
    make_runner(registry=registry).drain()

    told = (
        "gave up after 1 of 1 attempts: "
        f"RuntimeError: the certificate store is read-only (order {order.pk})"
    )
    order.refresh_from_db()
    assert (order.state, order.reason) == (State.INVALID, told), "one line, what was raised"
    answer = client.get(f"/orders/{order.pk}/").json()
    assert answer["reason"] == told, "the API answers the client with that line"
