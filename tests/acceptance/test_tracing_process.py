"""Traces across processes (`jobs.tracing`): an attempt run by a real `runjobs`
process links to the span that queued its job in this one, and where
OpenTelemetry cannot be imported, nothing of it is imported or stored.

Here, not in tests/integration/tracing, because each starts a process of its
own: the link must survive the row, not a thread's context, and a blocked
import can only be proved in a process that never had the package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobs import JobSpec, enqueue
from jobs.models import Job, State
from tests.conftest import ROOT, database_url
from tests.integration.tracing.support import hex_context, read_spans
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def _ids(context: dict[str, str]) -> dict[str, str]:
    return {"trace_id": context["trace_id"], "span_id": context["span_id"]}


def test_an_attempt_in_a_runjobs_process_links_to_the_span_that_queued_it_in_this_one(
    runjobs, tmp_path
):
    """A span is exported only once it has ended: at the settle (`tracing.finished`)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("tests").start_as_current_span("queue the work"):
        assert enqueue(JobSpec.now("test.record", "k"))
    [enqueuing] = exporter.get_finished_spans()

    spans_file = tmp_path / "spans.jsonl"
    process = runjobs("--burst", env={"TEST_JOBS_SPANS_FILE": str(spans_file)})
    assert process.wait() == 0, process.output()
    assert Job.objects.get(key="k").state == State.DONE, process.output()

    attempts = [span for span in read_spans(spans_file) if span["name"] == "jobs.attempt"]
    assert len(attempts) == 1, f"one ended attempt span, exported by the runner: {attempts}"
    [span] = attempts
    assert [_ids(link["context"]) for link in span["links"]] == [hex_context(enqueuing)], (
        "the attempt's span links to the span that queued its job, in another process"
    )
    assert span["context"]["trace_id"] != hex_context(enqueuing)["trace_id"], (
        "the attempt starts a trace of its own"
    )
    assert span["kind"] == "SpanKind.CONSUMER"
    assert span["attributes"] == {
        "kind": "test.record",
        "queue": "default",
        "attempt": 1,
        "outcome": "done",
    }


#: Sets Django up on the test database with every `opentelemetry` import
#: refused, queues a job, drains it with `runjobs --burst`, and prints what
#: `jobs.tracing` decided and which OpenTelemetry modules were imported.
_WITHOUT_OPENTELEMETRY = """
import json, sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

if sys.argv[1] == "absent":
    sys.meta_path.insert(0, Absent())

import django
django.setup()
from django.core.management import call_command
from jobs import JobSpec, enqueue, tracing

assert enqueue(JobSpec.now("test.record", "untraced"))
call_command("runjobs", "--burst")
imported = sorted(name for name in sys.modules if name.partition(".")[0] == "opentelemetry")
print(json.dumps({"enabled": tracing.ENABLED, "imported": imported}))
"""


@pytest.mark.parametrize(
    ("opentelemetry", "installed"), [("absent", False), ("unused", True)], ids=["absent", "unused"]
)
def test_without_opentelemetry_in_use_jobs_imports_none_of_it_and_stores_no_traceparent(
    opentelemetry, installed
):
    """Absent, or installed but imported by nothing in the project: either way
    no span could be current, and the import (~35 ms a process) is not paid."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": database_url()}
    env.pop("TEST_JOBS_SPANS_FILE", None)
    ran = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPENTELEMETRY, opentelemetry],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout.strip().splitlines()[-1])
    assert said == {"enabled": installed, "imported": []}, "nothing of OpenTelemetry is imported"
    job = Job.objects.get(key="untraced")
    assert job.traceparent is None, "nothing is stored"
    assert job.state == State.DONE, f"the attempt ran as it always did:\n{ran.stderr}"
    assert Execution.objects.filter(job_id=job.id).count() == 1
