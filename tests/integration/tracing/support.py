"""Where the tracing tests' spans go: the SDK's in-memory exporter in this process,
a file of JSON lines in a `runjobs` process (`export_spans_to`, which
tests/settings.py calls when `TEST_JOBS_SPANS_FILE` names the file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor


def export_spans_to(path: str) -> None:
    """Make this process's tracer provider one that appends each span, as it
    ends, to `path` as a line of JSON (flushed at once: the process may be
    killed or exit without shutting the provider down)."""
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(
            ConsoleSpanExporter(
                out=open(path, "a"),  # noqa: SIM115  # held for the process's life
                formatter=lambda span: span.to_json(indent=None) + "\n",
            )
        )
    )
    trace.set_tracer_provider(provider)


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans `export_spans_to` wrote to `path`, in the order they ended."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def hex_context(span: ReadableSpan | trace.Span) -> dict[str, str]:
    """A span's ids as the SDK's JSON writes them."""
    context = span.get_span_context()
    assert context is not None
    return {
        "trace_id": f"0x{trace.format_trace_id(context.trace_id)}",
        "span_id": f"0x{trace.format_span_id(context.span_id)}",
    }


def traceparent_of(span: ReadableSpan | trace.Span) -> str:
    """The W3C traceparent naming `span`, with its flags."""
    context = span.get_span_context()
    assert context is not None
    trace_id = trace.format_trace_id(context.trace_id)
    span_id = trace.format_span_id(context.span_id)
    return f"00-{trace_id}-{span_id}-{context.trace_flags:02x}"
