"""A view that enqueues a Django task inside its own transaction, as a project's
views do: for the backend's tests from a request."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from tests.jobapp import tasks


def report(request: HttpRequest) -> JsonResponse:
    """Queue `add` with the priority and queue the request names, then fail
    after it (rolling the enqueue back) when the request says so."""
    with transaction.atomic():
        result = tasks.add.using(
            priority=int(request.POST["priority"]), queue_name=request.POST["queue"]
        ).enqueue(1, 2)
        if request.POST.get("fail"):
            raise RuntimeError("the request failed after queueing its task")
    return JsonResponse({"id": result.id})
