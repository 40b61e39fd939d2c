"""One SDK tracer provider for this process, exporting to memory, and the spans a
test made; the runner's quick poll, for the tests that run one."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def quick_poll(configure: Callable[..., None]) -> None:
    """An idle pass should not cost the default second (as tests/integration/runner)."""
    configure(poll_interval_ms=20)


@pytest.fixture(scope="session")
def _memory() -> InMemorySpanExporter:
    """The global tracer provider can be set once per process: set here, for the
    session, so `jobs.tracing`'s tracer (a proxy until then) follows it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "no other tracer provider was set first"
    return exporter


@pytest.fixture
def exported(_memory: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """The spans that ended during this test, and only those."""
    _memory.clear()
    yield _memory
    _memory.clear()


@pytest.fixture
def tracer(_memory: InMemorySpanExporter) -> trace.Tracer:
    """The test's own tracer, for the spans an enqueue or a handler runs in."""
    return trace.get_tracer("tests")
