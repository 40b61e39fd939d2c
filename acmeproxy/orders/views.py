"""The orders JSON API: create, finalize, poll.

    POST /orders/               a new `pending` order                  201
    POST /orders/<id>/finalize  `processing`, and the relay queued      200
    GET  /orders/<id>           the order as it is now                 200

Every answer is JSON: the order as `{"id", "state", "reason", "certificate"}`
(`reason` and `certificate` null until there is one), or `{"error": ...}` with
404 for an unknown id, 400 for a body that is not a JSON object, 405 for a
wrong method, 409 for a finalize the order's state refuses.

Finalize is idempotent, so a client that lost the answer can simply ask again:

- `pending`: becomes `processing` and the relay is queued, in one transaction,
  so the job exists exactly when the state change does.
- `processing`: answers `processing`, and queues the relay again. That is
  refused while the relay is live (the usual case), and restores it if it was
  lost.
- `valid`: answers `valid`; the certificate is there to read.
- `invalid`: 409. The order failed for good and finalizing it again cannot
  change that; the client must place a new order.

The views are CSRF-exempt: this is an API for non-browser clients, which no
cookie authenticates, so there is no session a cross-site form could ride.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from acmeproxy.orders.jobs import relay
from acmeproxy.orders.models import Order, State
from jobs import enqueue

View = Callable[..., HttpResponse]

#: An order id as the URL spells it: digits that fit the id column (a signed 64-bit integer).
_ID = re.compile(r"[0-9]{1,18}")


def allow(*methods: str) -> Callable[[View], View]:
    """Answer any other method with a JSON 405 naming the allowed ones."""

    def decorate(view: View) -> View:
        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error(405, f"{request.method} is not allowed here")
                response["Allow"] = ", ".join(methods)
                return response
            return view(request, *args, **kwargs)

        return checked

    return decorate


@csrf_exempt  # a JSON API for non-browser clients; see the module docstring
@allow("POST")
def create(request: HttpRequest) -> HttpResponse:
    """A new pending order. The example's orders carry no data, so the body may be
    empty or any JSON object; anything else is a client's mistake worth a 400."""
    if request.body.strip():
        try:
            document = json.loads(request.body)
        except ValueError:
            return error(400, "the body is not JSON")
        if not isinstance(document, dict):
            return error(400, "the body must be a JSON object")
    order = Order.objects.create()
    response = JsonResponse(describe(order), status=201)
    response["Location"] = reverse("orders:detail", args=[order.pk])
    return response


@csrf_exempt  # a JSON API for non-browser clients; see the module docstring
@allow("POST")
def finalize(request: HttpRequest, order_id: str) -> HttpResponse:
    with transaction.atomic():
        order = find(order_id, for_update=True)
        if order is None:
            return not_found(order_id)
        if order.state == State.INVALID:
            return JsonResponse(
                {"error": "the order is invalid; place a new order", **describe(order)},
                status=409,
            )
        if order.state == State.PENDING:
            order.state = State.PROCESSING
            order.save(update_fields=["state", "updated_at"])
        if order.state == State.PROCESSING:
            enqueue(relay(order.pk))
    return JsonResponse(describe(order))


@csrf_exempt  # the CSRF check would answer an unsafe method with HTML, not the API's 405
@allow("GET", "HEAD")
def detail(request: HttpRequest, order_id: str) -> HttpResponse:
    order = find(order_id)
    if order is None:
        return not_found(order_id)
    return JsonResponse(describe(order))


def describe(order: Order) -> dict[str, Any]:
    return {
        "id": order.pk,
        "state": order.state,
        "reason": order.reason or None,
        "certificate": order.certificate or None,
    }


def find(order_id: str, *, for_update: bool = False) -> Order | None:
    if not _ID.fullmatch(order_id):
        return None
    orders = Order.objects.select_for_update() if for_update else Order.objects.all()
    return orders.filter(pk=int(order_id)).first()


def not_found(order_id: str) -> JsonResponse:
    return error(404, f"there is no order {order_id!r}")


def error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)
