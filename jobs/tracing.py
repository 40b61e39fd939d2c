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

Without the package nothing is imported and nothing is stored (the column
stays NULL); every function here is then one check of `ENABLED`. The package
brings no SDK: until the project configures a tracer provider no span is
made at all (an attempt checks once which provider is set).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

try:
    from opentelemetry import context, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:
    ENABLED = False
else:
    ENABLED = True

if TYPE_CHECKING:
    from jobs.models import Job

#: The tracer's name: the spans of this app are found under it.
TRACER = "jobs"
#: The name of an attempt's span.
ATTEMPT_SPAN = "jobs.attempt"
#: Outcomes whose span is marked as an error: the attempt did not do its work
#: and will not be tried again (`failed`), or ran past its budget.
ERROR_OUTCOMES = frozenset({"failed", "timed_out"})
#: The longest traceparent the column holds: version 00's, the only one written.
TRACEPARENT_LENGTH = 55

if ENABLED:
    _propagator = TraceContextTextMapPropagator()
    #: A proxy until a tracer provider is configured, which it then follows:
    #: a project may configure one after this module is imported.
    _tracer = trace.get_tracer(TRACER)
    #: Spans of attempts that have not settled, by (job id, attempt number).
    _open: dict[tuple[uuid.UUID, int], trace.Span] = {}
    _lock = threading.Lock()

_NOTHING = contextlib.nullcontext()


def traceparent() -> str | None:
    """The W3C traceparent of the current span, for `enqueue` to store on its
    row; None when tracing is absent or no valid span is current."""
    if not ENABLED:
        return None
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
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
    if not ENABLED:
        return False
    now = time.monotonic()
    if now - _asked_at < 1.0:
        return False
    _asked_at = now
    _provider_set = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _provider_set


_provider_set = False
_asked_at = -1.0


@contextlib.contextmanager
def _attempt(job: Job) -> Iterator[None]:
    linked = _enqueuing_span(job.traceparent)
    span = _tracer.start_span(
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
    if not ENABLED:
        return
    span = _take(job)
    if span is None:
        return
    span.set_attribute("outcome", outcome)
    if outcome in ERROR_OUTCOMES:
        span.set_status(trace.Status(trace.StatusCode.ERROR, outcome))
    span.end()


def all_finished(jobs: Iterable[Job], outcome: str) -> None:
    """`finished` for each of `jobs`, a batch settled together; nothing is
    walked while no span is open (tracing absent, or no provider configured)."""
    if ENABLED and _open:
        for job in jobs:
            finished(job, outcome)


def forget(job: Job) -> None:
    """End the span of the attempt `job` describes with no outcome, if it is
    still open: for an attempt whose settle was lost. Idempotent."""
    if not ENABLED or not _open:
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
    extracted = _propagator.extract({"traceparent": value})
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None
