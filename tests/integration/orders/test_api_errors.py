"""The orders API answers every error in JSON, with the status that names it.

Each request here is one a client (or a scanner) can send, and each used to
reach a Django page instead: a 500 from a recursion, Django's HTML 400 for a
large body, the site's HTML 404 for an encoded `..%2f..`, and a 201 for a body
that is not JSON at all. DEBUG is off, as in production, where Django's pages
are plain HTML; the client does not re-raise a server error, as no real one
can.
"""

from __future__ import annotations

import pytest
from django.test import Client

from acmeproxy.orders.models import Order

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(settings) -> Client:
    settings.DEBUG = False
    return Client(raise_request_exception=False)


def assert_json_error(answer, status: int, words: str) -> None:
    assert answer.status_code == status, f"{status} expected, got {answer.status_code}"
    assert answer["Content-Type"] == "application/json", (
        f"the API answers JSON, not a page: {answer.content[:200]!r}"
    )
    assert words in answer.json()["error"], f"the error says why: {answer.json()}"


def test_a_body_nested_too_deeply_to_parse_is_a_400_not_a_server_error(api):
    """100,000 `[`: Python's parser gives up with a RecursionError, which was a 500."""
    answer = api.post("/orders/", data="[" * 100_000, content_type="application/json")

    assert_json_error(answer, 400, "nested too deeply")
    assert not Order.objects.exists(), "a refused request creates no order"


@pytest.mark.parametrize("body", ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}'])
def test_nan_and_infinity_are_refused_since_they_are_not_json(api, body):
    """Python's json module reads them; the JSON grammar has no such numbers."""
    answer = api.post("/orders/", data=body, content_type="application/json")

    assert_json_error(answer, 400, "is not a JSON number")
    assert not Order.objects.exists(), "a refused request creates no order"


def test_a_body_over_the_upload_limit_is_a_413_naming_the_limit(api, settings):
    """Django refuses the body as too big; it was its HTML 400 page."""
    too_big = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    answer = api.post("/orders/", data=b" " * too_big, content_type="application/json")

    assert_json_error(answer, 413, f"over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes")
    assert not Order.objects.exists(), "a refused request creates no order"


@pytest.mark.parametrize(
    "path",
    [
        "/orders/..%2f..",
        "/orders/..%2F..%2Fadmin%2F",
        "/orders/1/finalize/again",
        "/orders/1/certificate",
        "/orders//",
    ],
)
@pytest.mark.parametrize("method", ["get", "post"])
def test_any_other_path_under_orders_is_the_apis_404(api, path, method):
    """Not the site's HTML 404 (nor, for a POST, the CSRF check's HTML 403)."""
    answer = getattr(Client(enforce_csrf_checks=True, raise_request_exception=False), method)(path)

    assert_json_error(answer, 404, "in the orders API")


def test_a_server_failure_in_the_api_is_a_json_500(api, monkeypatch):
    def fail(**fields):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(Order.objects, "create", fail)

    answer = api.post("/orders/", data="", content_type="application/json")

    assert_json_error(answer, 500, "failed to answer")
    assert "database" not in answer.json()["error"], "the server's own words stay in its log"


def test_a_request_for_a_host_not_allowed_is_the_apis_json_400(api):
    answer = api.get("/orders/1", HTTP_HOST="not-ours.example")

    assert_json_error(answer, 400, "refused")


def test_with_debug_on_a_host_not_allowed_is_still_the_apis_json_400(settings):
    """DEBUG=True skips handler400 for Django's technical HTML page; the API's
    clients read JSON whatever the server's DEBUG."""
    settings.DEBUG = True
    answer = Client(raise_request_exception=False).get("/orders/1", HTTP_HOST="not-ours.example")

    assert_json_error(answer, 400, "refused")


def test_with_debug_on_a_server_error_in_the_api_is_json_and_its_detail_stays_in_the_log(
    settings, monkeypatch, caplog
):
    settings.DEBUG = True

    def broken(*args, **kwargs):
        raise RuntimeError("the database is on fire")

    monkeypatch.setattr(Order.objects, "create", broken)
    answer = Client(raise_request_exception=False).post("/orders/", content_type="application/json")

    assert_json_error(answer, 500, "failed to answer")
    assert "fire" not in answer.content.decode(), "the server's own words stay in its log"
    assert "the database is on fire" in caplog.text, "the log keeps what broke"


def test_the_rest_of_the_site_keeps_djangos_pages(api, settings):
    """The JSON handlers are for the API's paths only."""
    assert api.get("/nothing-here")["Content-Type"].startswith("text/html"), "the site's 404"
    answer = api.get("/admin/", HTTP_HOST="not-ours.example")
    assert (answer.status_code, answer["Content-Type"].split(";")[0]) == (400, "text/html"), (
        "the site's 400"
    )
