"""The table's gauges as a Django view, for a project to mount in its URLconf:

    from jobs.metrics.views import metrics
    urlpatterns = [path("jobs/metrics", metrics)]

Never open: a request passes with `Authorization: Bearer <token>` matching
`settings.JOBS_METRICS_TOKEN` (a string of 16 characters or more: a shorter
one is refused, and check jobs.E008 says so; Prometheus's `authorization` scrape setting
sends it), or from a signed-in user with the `jobs.view_job` permission (an
operator looking from the admin's session). Anything else is refused: 401
for no credentials or a wrong token, 403 for a user without the permission.

It serves only the gauges read from the database (`jobs_ready`,
`jobs_queue_lag_seconds`, `jobs_waiting_jobs`, `jobs_stuck`, `jobs_live_runners`), which are the
same whichever web process answers; each process's own counters are for
the project's own exposition of prometheus_client's registry. `using`
(a URL keyword argument) names the database alias, default "default".
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from jobs.metrics.database import TableCollector

#: The permission that lets a signed-in user read the metrics.
PERMISSION = "jobs.view_job"
#: The shortest `JOBS_METRICS_TOKEN` accepted (check jobs.E008 reports a shorter one).
METRICS_TOKEN_MIN_LENGTH = 16


@require_GET
def metrics(request: HttpRequest, using: str | None = None) -> HttpResponse:
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TableCollector(using))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when `request` may read the metrics, else the response refusing it."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        token = getattr(settings, "JOBS_METRICS_TOKEN", None)
        usable = isinstance(token, str) and len(token) >= METRICS_TOKEN_MIN_LENGTH
        if usable and hmac.compare_digest(credentials.strip().encode(), str(token).encode()):
            return None
        return _unauthorized("invalid_token")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return _unauthorized(None)
    if not user.has_perm(PERMISSION):
        return HttpResponse(
            f"the {PERMISSION} permission is needed\n", status=403, content_type="text/plain"
        )
    return None


def _unauthorized(error: str | None) -> HttpResponse:
    response = HttpResponse(
        "a bearer token (JOBS_METRICS_TOKEN) or a user with the "
        f"{PERMISSION} permission is needed\n",
        status=401,
        content_type="text/plain",
    )
    challenge = 'Bearer realm="jobs"'
    response["WWW-Authenticate"] = f'{challenge}, error="{error}"' if error else challenge
    return response
