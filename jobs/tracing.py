"""Traces, when `opentelemetry-api` is installed: each attempt runs in a span
linked to the span that enqueued it.

An enqueue and its attempt are in different processes, seconds or days apart,
so the attempt is not a child of the enqueuing span but a new trace with a
link to it: `enqueue` stores the W3C `traceparent` of the current span on the
row, and the attempt's span (`jobs.attempt`, kind CONSUMER) links to it. The
span is current while the handler runs, so spans the handler opens nest under
it, and it ends when the attempt settles, not when the handler returns: only
the settle knows the outcome (a Done is settled in a batch by the runner's
loop, a timed-out attempt by the completer while its thread runs on). Until
then it is kept here, by job and attempt number.

OpenTelemetry is never imported here first: until something in the process
has imported its API (the project's tracing setup, an instrumentation), no
span can be current and no provider set, so there is nothing to store or
link, and a project that does not trace pays neither the import (~35 ms a
process) nor a check per attempt beyond a dictionary lookup. Without the
package nothing is imported and nothing is stored (the column stays NULL).
The package brings no SDK: until the project sets a tracer provider no span
is made at all (an attempt asks at most once a second which one is set).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from jobs.history import Outcome

if TYPE_CHECKING:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from jobs.models import Job


def _installed() -> bool:
    """Whether opentelemetry-api can be imported: found, not imported."""
    try:
        return importlib.util.find_spec("opentelemetry") is not None
    except (ImportError, ValueError):
        return False


#: Whether opentelemetry-api is installed.
ENABLED = _installed()
#: Its API module, which is imported by whoever uses OpenTelemetry.
_API = "opentelemetry.trace"

#: The tracer's name: the spans of this app are found under it.
TRACER = "jobs"
#: The name of an attempt's span.
ATTEMPT_SPAN = "jobs.attempt"
#: Outcomes whose span is marked as an error: the attempt did not do its work
#: and will not be tried again (`failed`), or ran past its budget.
ERROR_OUTCOMES = frozenset({Outcome.FAILED, Outcome.TIMED_OUT})
#: The longest traceparent the column holds: version 00's, the only one written.
TRACEPARENT_LENGTH = 55

#: Spans of attempts that have not settled, by (job id, attempt number).
_open: dict[tuple[uuid.UUID, int], trace.Span] = {}
_lock = threading.Lock()


def _in_use() -> bool:
    """Whether this process uses OpenTelemetry: installed, and its API imported."""
    return ENABLED and _API in sys.modules


def _propagator() -> TraceContextTextMapPropagator:
    """W3C trace context, whatever propagator the project set globally."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


_NOTHING = contextlib.nullcontext()


def traceparent() -> str | None:
    """The W3C traceparent of the current span, for `enqueue` to store on its
    row; None when tracing is absent or no valid span is current."""
    if not _in_use():
        return None
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    value = carrier.get("traceparent")
    return value if value is not None and len(value) <= TRACEPARENT_LENGTH else None


def attempt(job: Job) -> AbstractContextManager[None]:
    """Around a handler's call, on its worker thread: a `jobs.attempt` span,
    current for the block, linked to the span that enqueued `job`.

    An exception that escapes the block is recorded on the span. The span is
    not ended here: `finished` ends it with the outcome, or `forget` without.
    """
    if not active():
        return _NOTHING  # no provider configured: every span would be a no-op
    return _attempt(job)


def active() -> bool:
    """Whether an attempt gets a span: OpenTelemetry is installed and the
    project has set a tracer provider. Called for every attempt, first: a
    provider once set stays (the API refuses a second); until one is, it is
    asked at most once a second, as asking reads the environment."""
    global _provider_set, _asked_at
    if _provider_set:
        return True
    if not _in_use():
        return False
    now = time.monotonic()
    if now - _asked_at < 1.0:
        return False
    _asked_at = now
    from opentelemetry import trace

    _provider_set = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _provider_set


_provider_set = False
_asked_at = -1.0


@contextlib.contextmanager
def _attempt(job: Job) -> Iterator[None]:
    from opentelemetry import context, trace

    linked = _enqueuing_span(job.traceparent)
    span = trace.get_tracer(TRACER).start_span(
        ATTEMPT_SPAN,
        # A root: the attempt starts its own trace, whatever the worker thread
        # had current, and reaches its enqueue by the link.
        context=context.Context(),
        kind=trace.SpanKind.CONSUMER,
        attributes={"kind": job.kind, "queue": job.queue, "attempt": job.attempts},
        links=[trace.Link(linked)] if linked is not None else None,
    )
    with _lock:
        _open[job.id, job.attempts] = span
    try:
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            yield
    except BaseException as error:
        if span.is_recording():  # not yet ended by a timed-out settle
            span.record_exception(error)
        raise


def finished(job: Job, outcome: str) -> None:
    """End the span of the attempt `job` describes, settled as `outcome` (one of
    `jobs.signals.OUTCOMES`); an error for `ERROR_OUTCOMES`. Does nothing for an
    attempt with no open span, so a second call, or one for a job that never
    ran, is harmless."""
    if not _open:
        return
    span = _take(job)
    if span is None:
        return
    from opentelemetry import trace

    span.set_attribute("outcome", outcome)
    if outcome in ERROR_OUTCOMES:
        span.set_status(trace.Status(trace.StatusCode.ERROR, outcome))
    span.end()


def all_finished(jobs: Iterable[Job], outcome: str) -> None:
    """`finished` for each of `jobs`, a batch settled together; nothing is
    walked while no span is open (tracing absent, or no provider configured)."""
    if _open:
        for job in jobs:
            finished(job, outcome)


def forget(job: Job) -> None:
    """End the span of the attempt `job` describes with no outcome, if it is
    still open: for an attempt whose settle was lost. Idempotent."""
    if not _open:
        return
    span = _take(job)
    if span is not None:
        span.end()


def _take(job: Job) -> trace.Span | None:
    with _lock:
        return _open.pop((job.id, job.attempts), None)


def _enqueuing_span(value: object) -> trace.SpanContext | None:
    """The span context a stored traceparent names, or None when there is none
    or it does not parse (the column can be written by hand): never raises,
    since what raises here would fail the attempt."""
    if not isinstance(value, str) or not value:
        return None
    from opentelemetry import trace

    extracted = _propagator().extract({"traceparent": value})
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None
