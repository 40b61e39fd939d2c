"""The orders JSON API: create, finalize, poll.

    POST /orders/               a new `pending` order                  201
    POST /orders/<id>/finalize  `processing`, and the relay queued      200
    GET  /orders/<id>           the order as it is now                 200

Every answer is JSON: the order as `{"id", "state", "reason", "certificate"}`
(`reason` and `certificate` null until there is one), or `{"error": ...}` with

- 400 for a body that is not a JSON object: not JSON at all, `NaN` or
  `Infinity` (which Python's parser accepts and JSON does not), or nested too
  deeply to parse; and for a request Django refuses as suspicious (a host
  outside `ALLOWED_HOSTS`);
- 404 for an unknown id, and for any other path under `/orders/`;
- 405 for a wrong method;
- 409 for a finalize the order's state refuses;
- 413 for a body over Django's `DATA_UPLOAD_MAX_MEMORY_SIZE` (2.5 MB);
- 500 when the server fails (`server_error`, the project's `handler500` for
  this API's paths; the rest of the site keeps Django's pages).

The same JSON answers these paths with `DEBUG=True`, where Django would show
its technical pages instead (`acmeproxy.orders.middleware`).

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

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views import defaults
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
    refused = refuse_body(request)
    if refused is not None:
        return refused
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


@csrf_exempt  # a JSON API for non-browser clients; see the module docstring
def nowhere(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any other path under /orders/ (`/orders/..%2f..` among them): the API's 404."""
    return error(404, f"there is no {request.path!r} in the orders API")


def refuse_body(request: HttpRequest) -> JsonResponse | None:
    """The answer to a body that is not empty or a JSON object; None for one that is."""
    try:
        body = request.body
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return error(413, f"the body is over {limit:,} bytes")
    if not body.strip():
        return None
    try:
        document = json.loads(body, parse_constant=_not_json)
    except RecursionError:
        return error(400, "the body is nested too deeply")
    except NotJSON as refusal:
        return error(400, f"the body is not JSON: {refusal}")
    except ValueError:
        return error(400, "the body is not JSON")
    if not isinstance(document, dict):
        return error(400, "the body must be a JSON object")
    return None


class NotJSON(ValueError):
    """A constant Python's parser accepts and JSON does not."""


def _not_json(constant: str) -> Any:
    raise NotJSON(f"{constant} is not a JSON number")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The project's `handler400`: JSON for this API, Django's page for the rest of the site."""
    if in_api(request):
        return bad_request_answer()
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """The project's `handler500`: JSON for this API, Django's page for the rest of the site."""
    if in_api(request):
        return server_error_answer()
    return defaults.server_error(request)


def bad_request_answer() -> JsonResponse:
    """The API's 400 for a request Django refuses (`handler400`, and under
    `DEBUG` the `JSONErrorsMiddleware`)."""
    return error(400, "the request was refused as malformed or suspicious")


def server_error_answer() -> JsonResponse:
    """The API's 500: the server's own words stay in its log."""
    return error(500, "the server failed to answer; try again later")


def in_api(request: HttpRequest) -> bool:
    """Whether `request` is for this API (`/orders` and below)."""
    root = reverse("orders:create").rstrip("/")
    return request.path_info == root or request.path_info.startswith(root + "/")


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
