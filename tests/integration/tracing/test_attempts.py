"""The span each attempt runs in, with an in-process runner: `jobs.attempt`, a
consumer span starting its own trace, linked to the span that queued the job,
current while the handler runs, and ended with its outcome when it settles.

The handlers keep the span current while they run (`trace.get_current_span`),
so what the attempt's span holds is read from the span itself, ended or not.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from jobs import Done, Failed, JobSpec, Retry, enqueue
from jobs.models import Job
from jobs.registry import Registry
from tests.integration.runner.support import Recording, install

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("quick_poll")]


class Traced(Recording):
    """Keeps the span current while it runs, opens one of its own, and ends
    each attempt with the next of `outcomes` (an exception is raised)."""

    kind = "test.traced"

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[Any] = []
        self.outcomes: list[object] = []

    def run(self, job: Job) -> Any:
        self.spans.append(trace.get_current_span())
        with trace.get_tracer("tests").start_as_current_span("the handler's own work"):
            pass
        outcome = self.outcomes.pop(0) if self.outcomes else Done()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class TracedAsync(Traced):
    kind = "test.traced_async"

    async def run(self, job: Job) -> Any:
        return Traced.run(self, job)


def _ids(span_or_context: Any) -> tuple[int, int]:
    """A span's, or a span context's, trace and span ids."""
    context = (
        span_or_context
        if isinstance(span_or_context, trace.SpanContext)
        else span_or_context.get_span_context()
    )
    return context.trace_id, context.span_id


def _attempt_spans(exported) -> list[ReadableSpan]:
    return [span for span in exported.get_finished_spans() if span.name == "jobs.attempt"]


def test_an_attempt_runs_in_a_consumer_span_named_jobs_attempt_with_its_kind_queue_and_attempt(
    registry: Registry, make_runner
):
    handler = install(registry, Traced)
    assert enqueue(JobSpec.now(Traced.kind, "k").with_queue("mail"))
    make_runner(registry=registry, queues=["mail"]).drain()

    [span] = handler.spans
    assert span.name == "jobs.attempt"
    assert span.kind == trace.SpanKind.CONSUMER, "the attempt consumes what the enqueue produced"
    assert {name: span.attributes[name] for name in ("kind", "queue", "attempt")} == {
        "kind": Traced.kind,
        "queue": "mail",
        "attempt": 1,
    }


def test_an_attempts_span_links_to_the_span_that_enqueued_it_and_starts_a_trace_of_its_own(
    registry: Registry, make_runner, tracer
):
    handler = install(registry, Traced)
    with tracer.start_as_current_span("queue the work") as enqueuing:
        assert enqueue(JobSpec.now(Traced.kind, "k"))
    make_runner(registry=registry).drain()

    [span] = handler.spans
    assert [_ids(link.context) for link in span.links] == [_ids(enqueuing)], (
        "the attempt's span links to the span that queued its job"
    )
    assert span.parent is None, "an attempt is not a child of its enqueue: it is linked"
    assert _ids(span)[0] != _ids(enqueuing)[0], "the attempt starts a trace of its own"


def test_each_attempt_of_a_retried_job_runs_in_its_own_span_linked_to_the_same_enqueue(
    registry: Registry, make_runner, configure, tracer
):
    configure(retry_base_seconds=0, retry_max_seconds=0, max_attempts=3)
    handler = install(registry, Traced)
    handler.outcomes = [Retry("503")]
    with tracer.start_as_current_span("queue the work") as enqueuing:
        assert enqueue(JobSpec.now(Traced.kind, "k"))
    runner = make_runner(registry=registry)
    runner.drain()
    runner.drain()

    assert [span.attributes["attempt"] for span in handler.spans] == [1, 2]
    assert len({_ids(span) for span in handler.spans}) == 2, "a span per attempt"
    for span in handler.spans:
        assert [_ids(link.context) for link in span.links] == [_ids(enqueuing)]


def test_an_attempt_of_a_job_queued_outside_any_span_has_a_span_with_no_link(
    registry: Registry, make_runner
):
    handler = install(registry, Traced)
    assert enqueue(JobSpec.now(Traced.kind, "k"))
    make_runner(registry=registry).drain()

    [span] = handler.spans
    assert span.name == "jobs.attempt", "the attempt is traced all the same"
    assert list(span.links) == []


def test_a_traceparent_written_by_hand_that_does_not_parse_is_no_link_and_the_attempt_runs(
    registry: Registry, make_runner
):
    handler = install(registry, Traced)
    assert enqueue(JobSpec.now(Traced.kind, "k"))
    Job.objects.filter(key="k").update(traceparent="not a traceparent")
    make_runner(registry=registry).drain()

    [span] = handler.spans
    assert list(span.links) == []
    assert Job.objects.get(key="k").state == "done"


@pytest.mark.parametrize("handler_class", [Traced, TracedAsync], ids=["sync", "async"])
def test_spans_a_handler_opens_nest_under_its_attempts_span(
    registry: Registry, make_runner, exported, handler_class
):
    handler = install(registry, handler_class)
    assert enqueue(JobSpec.now(handler_class.kind, "k"))
    make_runner(registry=registry).drain()

    [attempt] = handler.spans
    [own] = [s for s in exported.get_finished_spans() if s.name == "the handler's own work"]
    assert own.parent is not None, "the handler's span has a parent"
    assert (own.parent.trace_id, own.parent.span_id) == _ids(attempt), (
        "the attempt's span is current while its handler runs"
    )


def test_an_exception_a_handler_raises_is_recorded_on_its_attempts_span(
    registry: Registry, make_runner, configure
):
    configure(retry_base_seconds=60)
    handler = install(registry, Traced)
    handler.outcomes = [ConnectionError("the upstream hung up")]
    assert enqueue(JobSpec.now(Traced.kind, "k"))
    make_runner(registry=registry).drain()

    [span] = handler.spans
    recorded = [event for event in span.events if event.name == "exception"]
    assert [event.attributes["exception.type"] for event in recorded] == ["ConnectionError"]
    assert recorded[0].attributes["exception.message"] == "the upstream hung up"


# -- ended when the attempt settles: needs the completer's `tracing.finished` ---


@pytest.mark.parametrize(
    ("outcome", "said", "status"),
    [
        (Done(), "done", trace.StatusCode.UNSET),
        (Retry("503"), "retry", trace.StatusCode.UNSET),
        (Failed("refused"), "failed", trace.StatusCode.ERROR),
    ],
    ids=["done", "retry", "failed"],
)
def test_an_attempts_span_ends_when_the_attempt_settles_with_its_outcome(
    registry: Registry, make_runner, configure, exported, tracer, outcome, said, status
):
    configure(retry_base_seconds=60)
    handler = install(registry, Traced)
    handler.outcomes = [outcome]
    with tracer.start_as_current_span("queue the work") as enqueuing:
        assert enqueue(JobSpec.now(Traced.kind, "k"))
    make_runner(registry=registry).drain()

    ended = _attempt_spans(exported)
    assert len(ended) == 1, "the attempt's span ends once its settle has committed"
    [span] = ended
    assert _ids(span) == _ids(handler.spans[0])
    assert span.attributes is not None
    assert span.attributes["outcome"] == said, "the span says how the attempt settled"
    assert span.status.status_code == status, "only an attempt that gave up is an error"
    assert [_ids(link.context) for link in span.links] == [_ids(enqueuing)]
