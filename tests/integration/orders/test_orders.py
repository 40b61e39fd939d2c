"""The orders example in this process: finalize and its transaction, the API's
answers, the relay handler called directly, and the upstream client against
`tests.upstream_stub`. End to end, with a real `runjobs` process, it is
tests/acceptance/test_orders_end_to_end.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from acmeproxy.orders import upstream as upstream_client
from acmeproxy.orders import views
from acmeproxy.orders.jobs import KIND, RelayHandler
from acmeproxy.orders.models import Order, State
from jobs import Done, Failed, Retry, enqueue
from jobs.models import Job
from tests.helpers import create_order, finalize
from tests.upstream_stub import unused_url

pytestmark = pytest.mark.django_db(transaction=True)


# -- finalize and its transaction --------------------------------------------------


def test_a_finalize_rolled_back_after_its_enqueue_leaves_no_job_and_the_order_pending(
    client, monkeypatch
):
    """The state change and the job commit together or not at all."""
    order_id = create_order(client)

    def enqueue_then_fail(spec):
        assert enqueue(spec), "the relay was queued inside the view's transaction"
        raise RuntimeError("the request failed after queueing its job")

    monkeypatch.setattr(views, "enqueue", enqueue_then_fail)
    with pytest.raises(RuntimeError, match="after queueing"):
        client.post(f"/orders/{order_id}/finalize")

    assert not Job.objects.filter(kind=KIND).exists(), "the rollback took the queued job with it"
    assert Order.objects.get(pk=order_id).state == State.PENDING, (
        "the rollback took the state change with it"
    )


def test_finalizing_twice_queues_one_relay_and_answers_processing_both_times(client, monkeypatch):
    """A client that lost the first answer can ask again without a second job."""
    queued: list[bool] = []

    def recording_enqueue(spec):
        queued.append(enqueue(spec))
        return queued[-1]

    monkeypatch.setattr(views, "enqueue", recording_enqueue)
    order_id = create_order(client)

    assert finalize(client, order_id)["state"] == "processing"
    assert finalize(client, order_id)["state"] == "processing", "the second answer is the same"

    assert queued == [True, False], "the second enqueue was refused: the relay is already live"
    assert Job.objects.filter(kind=KIND, key=str(order_id)).count() == 1, "one relay job"


def test_finalizing_a_valid_order_answers_valid_and_queues_nothing(client):
    order = Order.objects.create(state=State.VALID, certificate="PEM")

    answer = client.post(f"/orders/{order.pk}/finalize")

    assert (answer.status_code, answer.json()["state"]) == (200, "valid")
    assert not Job.objects.exists(), "there is nothing left to relay"


def test_finalizing_an_invalid_order_answers_409_with_its_reason_and_queues_nothing(client):
    order = Order.objects.create(state=State.INVALID, reason="refused")

    answer = client.post(f"/orders/{order.pk}/finalize")

    assert answer.status_code == 409, "an invalid order cannot be finalized again"
    assert (answer.json()["state"], answer.json()["reason"]) == ("invalid", "refused")
    assert "new order" in answer.json()["error"], "the error tells the client what to do"
    assert not Job.objects.exists()


# -- the API's answers ----------------------------------------------------------------


def test_creating_an_order_answers_201_pending_with_where_to_poll(client):
    answer = client.post("/orders/", data={"note": "ignored"}, content_type="application/json")

    assert answer.status_code == 201
    body = answer.json()
    assert (body["state"], body["reason"], body["certificate"]) == ("pending", None, None)
    assert answer["Location"] == f"/orders/{body['id']}", "the answer says where to poll"
    assert client.get(answer["Location"]).json() == body, "polling reads the same order"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/orders/999999"),
        ("post", "/orders/999999/finalize"),
        ("get", "/orders/not-an-id"),
        ("get", "/orders/99999999999999999999999999"),
    ],
)
def test_an_unknown_order_answers_404_as_json(client, method, path):
    answer = getattr(client, method)(path)

    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json", "the API answers JSON even for a 404"
    assert "no order" in answer.json()["error"]


@pytest.mark.parametrize("body", ["not json", "[1, 2]", '"an order"'])
def test_a_body_that_is_not_a_json_object_answers_400_as_json(client, body):
    answer = client.post("/orders/", data=body, content_type="application/json")

    assert answer.status_code == 400
    assert "error" in answer.json()
    assert not Order.objects.exists(), "a refused request creates no order"


def test_a_wrong_method_answers_405_as_json_naming_the_allowed_ones():
    """With CSRF checks on, as a real client meets them: an unsafe method on the
    poll URL must still be the API's JSON 405, not the site's HTML 403."""
    client = Client(enforce_csrf_checks=True)
    order = Order.objects.create()

    for method, path, allowed in [
        ("get", "/orders/", "POST"),
        ("get", f"/orders/{order.pk}/finalize", "POST"),
        ("delete", f"/orders/{order.pk}", "GET, HEAD"),
    ]:
        answer = getattr(client, method)(path)
        assert (answer.status_code, answer["Allow"]) == (405, allowed), path
        assert "not allowed" in answer.json()["error"]


# -- the relay handler, called directly -------------------------------------------------


def relay_job(order_id: Any) -> Job:
    """The claimed row the runner would hand the handler (unsaved: run only reads it)."""
    return Job(kind=KIND, key=str(order_id), payload={"order_id": order_id}, attempts=1)


def test_a_relay_rerun_for_an_order_already_valid_is_done_without_asking_the_upstream(
    settings, upstream
):
    """run starts from scratch: an earlier attempt that stored the certificate ends it."""
    settings.ORDERS_UPSTREAM_URL = upstream.url
    order = Order.objects.create(state=State.VALID, certificate="PEM")

    assert RelayHandler().run(relay_job(order.pk)) == Done()
    assert upstream.requests == [], "nothing was asked of the upstream"
    assert Order.objects.get(pk=order.pk).certificate == "PEM", "the certificate is untouched"


def test_a_relay_for_a_missing_order_fails_with_a_reason(settings, upstream):
    settings.ORDERS_UPSTREAM_URL = upstream.url

    outcome = RelayHandler().run(relay_job(424242))

    assert outcome == Failed("order 424242 does not exist"), "a missing order can never succeed"
    assert upstream.requests == []


def test_a_late_abandon_never_overwrites_an_order_that_is_already_valid():
    """Both relay writes are conditional on processing, so a terminal state is final."""
    order = Order.objects.create(state=State.VALID, certificate="PEM")

    RelayHandler().abandon(relay_job(order.pk), "gave up")

    order.refresh_from_db()
    assert (order.state, order.reason) == ("valid", ""), "a valid order stays valid"


def test_an_unreachable_upstream_is_a_retry_in_plain_words_with_its_detail_kept_below(
    settings,
):
    """The client may read the reason's line; the errno and the exception's
    repr are for the operator, in the attempt's history."""
    settings.ORDERS_UPSTREAM_URL = unused_url()
    order = Order.objects.create(state=State.PROCESSING)

    outcome = RelayHandler().run(relay_job(order.pk))

    assert isinstance(outcome, Retry)
    first, _, rest = outcome.reason.partition("\n")
    assert first == "upstream unreachable: Connection refused", first
    assert "ConnectionRefusedError(111" in rest, "the repr is kept below the line"
    assert isinstance(outcome.exception, ConnectionRefusedError), "its class for the history"


@pytest.mark.parametrize(
    ("reason", "read"),
    [
        (
            "gave up after 3 of 3 attempts: upstream unreachable: Connection refused\n"
            "ConnectionRefusedError(111, 'Connection refused')",
            "gave up after 3 of 3 attempts: upstream unreachable: Connection refused",
        ),
        ("bad CSR", "bad CSR"),
        (
            "gave up after 3 of 3 attempts: Traceback (most recent call last):\n"
            '  File "/srv/app/acmeproxy/orders/jobs.py", line 9, in run\n'
            "django.db.utils.OperationalError: the database is gone",
            "the relay failed on the server; place a new order",
        ),
    ],
)
def test_an_abandoned_order_s_client_reads_one_plain_line_of_the_reason(reason, read):
    order = Order.objects.create(state=State.PROCESSING)

    RelayHandler().abandon(relay_job(order.pk), reason)

    order.refresh_from_db()
    assert (order.state, order.reason) == ("invalid", read)


def test_the_relay_lease_outlasts_the_whole_upstream_request(settings):
    """The lease is what keeps a second attempt from starting while a request is in flight."""
    settings.ORDERS_UPSTREAM_TIMEOUT = 7.5

    assert RelayHandler().budget().total_seconds() > 7.5


# -- the upstream client --------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "answer"),
    [
        (200, b'{"certificate": "PEM"}', upstream_client.Issued("PEM")),
        (200, b"{}", upstream_client.Unavailable("upstream answered 200 without a certificate")),
        (503, b"", upstream_client.Unavailable("upstream answered HTTP 503")),
        (
            429,
            b'{"reason": "slow down"}',
            upstream_client.Unavailable("upstream answered HTTP 429"),
        ),
        (400, b'{"reason": "bad CSR"}', upstream_client.Refused("bad CSR")),
        (
            404,
            b"<html>",
            upstream_client.Refused("upstream refused the order with HTTP 404 and no reason"),
        ),
        (302, b"", upstream_client.Unavailable("upstream answered an unexpected HTTP 302")),
    ],
)
def test_the_upstreams_answers_sort_into_issued_refused_or_unavailable(status, body, answer):
    """What may pass is Unavailable (a Retry); only a 4xx that is not about load is Refused."""
    assert upstream_client.classify(status, body) == answer


def test_an_upstream_that_trickles_its_answer_is_cut_off_at_the_timeout(settings, upstream):
    """The relay's lease assumes the timeout bounds the whole request, not each read."""
    settings.ORDERS_UPSTREAM_URL = upstream.url
    settings.ORDERS_UPSTREAM_TIMEOUT = 0.5
    upstream.trickle = 0.05  # some 60 bytes: three seconds in all

    started = time.monotonic()
    answer = upstream_client.request_certificate(1)
    took = time.monotonic() - started

    assert answer == upstream_client.Unavailable("upstream did not answer within 0.5s")
    assert took < 1.5, f"the request ended at its timeout, not after the whole answer ({took:.2f}s)"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("post", "/orders", 201),
        ("get", "/orders/{id}/", 200),
        ("post", "/orders/{id}/finalize/", 200),
    ],
)
def test_each_route_answers_json_with_or_without_its_trailing_slash(client, method, path, status):
    """A client's habit about slashes must reach the API, not the site's HTML 404
    (or, for a POST under DEBUG, Django's APPEND_SLASH error page)."""
    order_id = create_order(client)

    answer = getattr(client, method)(
        path.format(id=order_id), data={}, content_type="application/json"
    )

    assert answer.status_code == status
    assert answer["Content-Type"] == "application/json"
