"""JSON errors for the orders API whatever `DEBUG` says.

With `DEBUG=False` the project's `handler400` and `handler500` answer the
API's paths in JSON. With `DEBUG=True` Django skips both for its technical
HTML pages, which the API's clients cannot read (and which show settings
and source to whoever sent a bad `Host`). This middleware, first in
`MIDDLEWARE`, answers the API's paths itself in the two cases Django would
otherwise page: a `Host` outside `ALLOWED_HOSTS` (checked before any other
middleware asks for it, so `DisallowedHost` is never raised on an API path),
and an exception escaping a view (while `DEBUG` is on: off, `handler500`
answers as it always has). Each is logged as Django logs it; the client reads
only the API's own words. The rest of the site keeps Django's pages.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import DisallowedHost, SuspiciousOperation
from django.http import HttpRequest, HttpResponse

from acmeproxy.orders.views import bad_request_answer, in_api, server_error_answer


class JSONErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if in_api(request):
            try:
                request.get_host()
            except DisallowedHost as refusal:
                return _refused(request, refusal)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not settings.DEBUG or not in_api(request):
            return None  # handler400/handler500, or Django's pages for the rest of the site
        if isinstance(exception, SuspiciousOperation):
            return _refused(request, exception)
        logging.getLogger("django.request").error(
            "Internal Server Error: %s",
            request.path,
            exc_info=sys.exc_info(),
            extra={"status_code": 500, "request": request},
        )
        return server_error_answer()


def _refused(request: HttpRequest, refusal: SuspiciousOperation) -> HttpResponse:
    """The API's 400, logged to `django.security.<class>` as Django logs it."""
    logging.getLogger(f"django.security.{type(refusal).__name__}").error(
        str(refusal), exc_info=refusal, extra={"status_code": 400, "request": request}
    )
    return bad_request_answer()
