"""OpenTelemetry: the enqueue stamps traceparent; the worker's job span is its child."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.app import jobs
from ultimate_jobs import Worker
from ultimate_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the global provider can be set once per process
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    EXPORTER.clear()
    return EXPORTER


def test_the_job_span_is_a_child_of_the_enqueuing_span(spans: InMemorySpanExporter) -> None:
    with trace.get_tracer("tests").start_as_current_span("POST /checkout") as request_span:
        r = jobs.noop.enqueue(key="traced")
    context = request_span.get_span_context()
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert Job.objects.get(id=r.id).traceparent == expected
    untraced = jobs.noop.enqueue(key="untraced")
    assert Job.objects.get(id=untraced.id).traceparent is None
    Worker(queues=["default"], burst=True).run(install_signals=False)
    job_spans = {s.attributes["job.id"]: s for s in spans.get_finished_spans() if s.name == "job tests.noop"}
    child = job_spans[str(r.id)]
    assert child.context.trace_id == context.trace_id and child.parent.span_id == context.span_id
    assert child.kind == trace.SpanKind.CONSUMER and child.attributes["job.queue"] == "default"
    assert job_spans[str(untraced.id)].parent is None


def test_a_failing_attempt_records_the_error_on_its_span(spans: InMemorySpanExporter) -> None:
    jobs.always_fails.enqueue(key="traced-failure")
    Worker(queues=["default"], burst=True).run(install_signals=False)
    failed = [s for s in spans.get_finished_spans() if s.name == "job tests.always_fails"]
    assert len(failed) == 3 and all(s.status.status_code == trace.StatusCode.ERROR for s in failed)
