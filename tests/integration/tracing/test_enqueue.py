"""What an enqueue stores for tracing: the W3C traceparent of the span it ran in,
for the attempt's span to link to, and nothing outside a span."""

from __future__ import annotations

import pytest
from django.urls import reverse
from opentelemetry import trace

from jobs import JobSpec, enqueue, enqueue_many
from jobs.models import Job
from tests.integration.tracing.support import traceparent_of

pytestmark = pytest.mark.django_db


def _many(spec: JobSpec) -> object:
    """`enqueue_many`, with another spec beside `spec` (PostgreSQL's arrays path)."""
    return enqueue_many([spec, JobSpec.now("test.any", "b")])


BOTH = pytest.mark.parametrize("queue", [enqueue, _many], ids=["enqueue", "enqueue_many"])


@BOTH
def test_an_enqueue_inside_a_span_stores_that_spans_traceparent_on_its_row(queue, tracer):
    with tracer.start_as_current_span("queue the work") as span:
        queue(JobSpec.now("test.any", "a"))
    stored = Job.objects.get(key="a").traceparent
    assert stored == traceparent_of(span), (
        "the row names the span that queued it, for the attempt's span to link to"
    )


@BOTH
def test_an_enqueue_outside_any_span_stores_null(queue, tracer):
    queue(JobSpec.now("test.any", "a"))
    assert Job.objects.get(key="a").traceparent is None, "no span current, nothing stored"


def test_an_enqueue_inside_a_span_that_is_not_recorded_still_stores_its_traceparent(tracer):
    """A span this process does not sample can be sampled by the process that
    runs the attempt: the link is to its context, whatever the sampling here."""
    context = trace.SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=trace.TraceFlags(0),
    )
    with trace.use_span(trace.NonRecordingSpan(context)):
        assert enqueue(JobSpec.now("test.any", "a"))
    assert Job.objects.get(key="a").traceparent == (
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    )


def test_the_jobs_admin_page_shows_the_traceparent_it_was_queued_with(admin_client, tracer):
    with tracer.start_as_current_span("queue the work") as span:
        assert enqueue(JobSpec.now("test.any", "a"))
    job = Job.objects.get(key="a")
    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.id]))
    assert page.status_code == 200
    assert traceparent_of(span) in page.content.decode(), (
        "an operator can find the trace that queued the job"
    )
