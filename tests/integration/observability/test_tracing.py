"""OpenTelemetry: the enqueue stamps traceparent; the worker's job span is its child."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.app import jobs
from ultimate_jobs import NO_TENANT, Retry
from ultimate_jobs.models import Job
from ultimate_jobs.testing import run_job

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


def test_the_job_span_is_a_child_of_the_enqueuing_span(spans: InMemorySpanExporter, make_worker) -> None:
    with trace.get_tracer("tests").start_as_current_span("POST /checkout") as request_span:
        r = jobs.noop.enqueue(key="traced")
    context = request_span.get_span_context()
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert Job.objects.get(id=r.id).traceparent == expected
    untraced = jobs.noop.enqueue(key="untraced")
    assert Job.objects.get(id=untraced.id).traceparent is None
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    job_spans = {s.attributes["job.id"]: s for s in spans.get_finished_spans() if s.name == "job tests.noop"}
    child = job_spans[str(r.id)]
    assert child.context.trace_id == context.trace_id and child.parent.span_id == context.span_id
    assert child.kind == trace.SpanKind.CONSUMER and child.attributes["job.queue"] == "default"
    assert job_spans[str(untraced.id)].parent is None


def test_a_failing_attempt_records_the_error_on_its_span(spans: InMemorySpanExporter, make_worker) -> None:
    jobs.always_fails.enqueue(key="traced-failure")
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    failed = [s for s in spans.get_finished_spans() if s.name == "job tests.always_fails"]
    assert len(failed) == 3 and all(s.status.status_code == trace.StatusCode.ERROR for s in failed)


PLANTED = ("hunter2-otel", "pw-in-url-otel", "4111-1111-otel")


def _exported(spans: InMemorySpanExporter) -> str:
    """Everything the exporter would ship: names, attributes, status text, events and their attributes."""
    parts = []
    for span in spans.get_finished_spans():
        parts += [span.name, repr(dict(span.attributes or {})), span.status.description or ""]
        for event in span.events:
            parts += [event.name, repr(dict(event.attributes or {}))]
    return "\n".join(parts)


def test_each_executed_step_opens_a_child_span_and_a_replayed_one_does_not(declare, spans) -> None:
    @declare(name="tests.traced_steps", idempotency_key="{k}", tenant=NO_TENANT, retry=Retry(attempts=2))
    def traced_steps(ctx, *, k: str) -> int:
        fetched = ctx.step.run("fetch", lambda: 41)

        def charge() -> int:
            if ctx.attempt == 1:
                raise ConnectionError(f"gateway down api_key={PLANTED[0]}")
            return fetched + 1

        return ctx.step.run("charge", charge)

    run = run_job(traced_steps, k="x")
    assert (run.state, run.result, run.attempt) == ("done", 42, 2)
    finished = spans.get_finished_spans()
    jobs_by_attempt = {s.attributes["job.attempt"]: s for s in finished if s.name == "job tests.traced_steps"}
    steps = [(s.name, s.parent.span_id) for s in finished if s.name.startswith("step ")]
    first, second = jobs_by_attempt[1].context.span_id, jobs_by_attempt[2].context.span_id
    # Attempt 1 ran fetch and a failing charge; attempt 2 replayed fetch (no span) and ran charge.
    assert steps == [("step fetch", first), ("step charge", first), ("step charge", second)]
    failed = next(s for s in finished if s.name == "step charge" and s.parent.span_id == first)
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert "ConnectionError" in failed.status.description and PLANTED[0] not in _exported(spans)
    assert [s.attributes["job.step"] for s in finished if s.name.startswith("step ")] == ["fetch", "charge", "charge"]


def test_exported_errors_are_redacted_like_last_error(declare, spans, make_worker) -> None:
    @declare(name="tests.leaky_otel", idempotency_key="{k}", tenant=NO_TENANT, retry=Retry(attempts=1))
    def leaky_otel(ctx, *, k: str) -> None:
        raise PermissionError(f"login refused password={PLANTED[0]} dsn postgres://app:{PLANTED[1]}@db/x")

    @declare(name="tests.sensitive_otel", idempotency_key="{k}", tenant=NO_TENANT, retry=Retry(attempts=1),
             sensitive=True)
    def sensitive_otel(ctx, *, k: str, card: str) -> None:
        raise ValueError(f"card {card} declined")

    leaky, secret = leaky_otel.enqueue(k="a"), sensitive_otel.enqueue(k="b", card=PLANTED[2])
    make_worker(queues=["default"], burst=True).run(install_signals=False)
    exported = _exported(spans)
    for planted in PLANTED:
        assert planted not in exported
        assert planted not in (Job.objects.get(id=leaky.id).last_error + Job.objects.get(id=secret.id).last_error)
    leaky_span = next(s for s in spans.get_finished_spans() if s.name == "job tests.leaky_otel")
    assert leaky_span.status.description.startswith("PermissionError: login refused password=[redacted]")
    (event,) = leaky_span.events
    assert event.name == "exception" and event.attributes["exception.type"] == "builtins.PermissionError"
    assert "postgres://app:[redacted]@db/x" in event.attributes["exception.message"]
    secret_span = next(s for s in spans.get_finished_spans() if s.name == "job tests.sensitive_otel")
    assert secret_span.status.description == "ValueError: [redacted]"
    assert "ValueError: [redacted]" in Job.objects.get(id=secret.id).last_error
