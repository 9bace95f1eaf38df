"""OpenTelemetry, when installed (the ``otel`` extra): a job's span is a child of the request
that enqueued it.

An enqueue stamps the current span's W3C ``traceparent`` on the row; the worker opens the
job's span (``job <name>``, kind CONSUMER) as its child around the body, so a trace shows the
HTTP request and the job that ran later as one; every durable step the attempt executes opens a
``step <name>`` child (``step_span``; a step replayed from storage ran in an earlier attempt and
opens none). Without opentelemetry-api every helper is a no-op; without an SDK no span is started
(the enqueuer's trace is still carried to the body's own enqueues).

A failure is recorded as an ``exception`` event and an ``ERROR`` status whose text passed through
the redactor first, exactly like the stored ``last_error`` (a ``sensitive=True`` job's messages
are ``[redacted]``): OpenTelemetry's own exception recording is switched off on these spans,
because it would export the raw exception text.

Usage: nothing to call; configure an OpenTelemetry SDK (a ``TracerProvider`` and exporter) in
the web and worker processes as usual.

Options: none. Logged events: none.
"""

from __future__ import annotations

import contextlib
import functools
import re
import traceback
from collections.abc import Iterator
from typing import Any

from ultimate_jobs.redact import REDACTED, redact_text

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")


@functools.cache
def _api() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


def current_traceparent() -> str | None:
    """The current span as a ``traceparent`` header value, or ``None`` outside a valid span."""
    trace = _api()
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _parent(traceparent: str | None) -> Any:
    trace = _api()
    match = _TRACEPARENT.match(traceparent or "")
    if trace is None or match is None:
        return None
    span_context = trace.SpanContext(trace_id=int(match[1], 16), span_id=int(match[2], 16), is_remote=True,
                                     trace_flags=trace.TraceFlags(int(match[3], 16)))
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


def _recording(trace: Any) -> bool:
    """Whether an SDK is installed to record spans: without one (the API's default proxy or the
    no-op provider) a span per attempt records nothing yet still costs a drain time
    (docs/reference/metrics.md)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@contextlib.contextmanager
def job_span(*, name: str, job_id: Any, queue: str, attempt: int, traceparent: str | None) -> Iterator[Any]:
    """The span of one attempt, a child of the enqueuer's span when the row carries one."""
    trace = _api()
    if trace is None:
        yield None
        return
    if not _recording(trace):
        parent = _parent(traceparent)
        if parent is None:
            yield None
            return
        # Nothing records here, but the body's own enqueues still carry the request's trace on.
        from opentelemetry import context as otel_context  # optional: reached only when _api() found the API

        token = otel_context.attach(parent)
        try:
            yield None
        finally:
            otel_context.detach(token)
        return
    tracer = trace.get_tracer("ultimate_jobs")
    attributes = {"job.id": str(job_id), "job.name": name, "job.queue": queue, "job.attempt": attempt,
                  "messaging.system": "ultimate_jobs", "messaging.destination.name": queue}
    with tracer.start_as_current_span(f"job {name}", context=_parent(traceparent), kind=trace.SpanKind.CONSUMER,
                                      attributes=attributes, record_exception=False,
                                      set_status_on_exception=False) as span:
        yield span


def record_error(span: Any, error: BaseException, *, sensitive: bool = False) -> None:
    """Mark ``span`` failed with ``error``, redacted as the stored error is (the body's exception
    is caught inside the span, as data for the retry decision, so the span would not see it on
    its own; and the SDK's ``record_exception`` would export the raw text)."""
    trace = _api()
    if span is None or trace is None:
        return
    kind = f"{type(error).__module__}.{type(error).__qualname__}"
    if sensitive:
        message = REDACTED
        stack = "".join(traceback.format_tb(error.__traceback__)) + f"{kind}: {REDACTED}"
    else:
        message = redact_text(str(error)) or ""
        stack = redact_text("".join(traceback.format_exception(error))) or ""
    span.add_event("exception", {"exception.type": kind, "exception.message": message,
                                 "exception.stacktrace": stack})
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {message}"[:200]))


@contextlib.contextmanager
def step_span(name: str) -> Iterator[Any]:
    """A child span of the current job span for one durable step."""
    trace = _api()
    if trace is None or not _recording(trace):
        yield None
        return
    with trace.get_tracer("ultimate_jobs").start_as_current_span(
            f"step {name}", attributes={"job.step": name}, record_exception=False,
            set_status_on_exception=False) as span:
        yield span
