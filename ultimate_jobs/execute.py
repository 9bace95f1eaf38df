"""Internal: the one execution path: run one claimed attempt and decide how it settles.

``run_attempt`` (sync bodies, on a pool thread) and ``run_attempt_async`` (``async def`` bodies,
on the worker's event-loop thread) build the context, install the tenant context, call the body
and hand the outcome to ``decide``, which reads the error (``retry.classify``) and the policy.
Settlement itself is the worker's, after this returns: it is never part of the retry decision.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.utils.module_loading import import_string

from . import jsoncodec
from .conf import get_settings
from .context import CancelToken, JobContext
from .db.store import ClaimedJob, Settlement
from .errors import X_JOB_FAILED, X_JOB_RESULT_UNSERIALIZABLE, JobCancelled
from .redact import redact_text
from .retry import classify
from .tracing import job_span

if TYPE_CHECKING:
    from .declaration import JobHandle

log = logging.getLogger("ultimate_jobs")

MAX_ERROR_CHARS = 8000
TERMINAL_NOTE = "not retried: this code is classified terminal"


def build_context(handle: JobHandle, claimed: ClaimedJob, token: CancelToken) -> tuple[JobContext, dict[str, Any]]:
    ctx = JobContext(job_id=claimed.id, run_id=claimed.run_id, name=claimed.name, queue=claimed.queue,
                     attempt=claimed.attempt, max_attempts=claimed.max_attempts, tenant_id=claimed.tenant_id,
                     enqueued_by=claimed.enqueued_by, cancelled=token)
    return ctx, jsoncodec.loads(claimed.payload)


def tenant_context(tenant_id: str | None) -> contextlib.AbstractContextManager[Any]:
    """The ``TENANT_CONTEXT`` factory's context manager for this tenant, or a no-op."""
    factory_path = get_settings().TENANT_CONTEXT
    if not factory_path:
        return contextlib.nullcontext()
    factory: Callable[[str | None], contextlib.AbstractContextManager[Any]] = import_string(factory_path)
    return factory(tenant_id)


def _span(claimed: ClaimedJob) -> contextlib.AbstractContextManager[Any]:
    """The attempt's OpenTelemetry span, a child of the enqueuer's (a no-op without opentelemetry)."""
    return job_span(name=claimed.name, job_id=claimed.id, queue=claimed.queue, attempt=claimed.attempt,
                    traceparent=claimed.traceparent)


def run_attempt(handle: JobHandle, claimed: ClaimedJob, token: CancelToken) -> Settlement | None:
    """Run one attempt of a sync body on this thread; answer how to settle it."""
    prepare_connections()
    try:
        ctx, kwargs = build_context(handle, claimed, token)
        with tenant_context(claimed.tenant_id), _span(claimed):
            result = handle.fn(ctx, **kwargs)
    except Exception as error:  # the body's failure is data for the retry decision
        _release_broken_connections()
        return decide(handle, claimed, token, error=error)
    return decide(handle, claimed, token, result=result)


async def run_attempt_async(handle: JobHandle, claimed: ClaimedJob, token: CancelToken) -> Settlement | None:
    """Run one attempt of an ``async def`` body on the worker's event loop."""
    try:
        ctx, kwargs = build_context(handle, claimed, token)
        with tenant_context(claimed.tenant_id), _span(claimed):
            result = await handle.fn(ctx, **kwargs)
    except Exception as error:
        return decide(handle, claimed, token, error=error)
    return decide(handle, claimed, token, result=result)


def decide(handle: JobHandle, claimed: ClaimedJob, token: CancelToken, *, result: Any = None,
           error: BaseException | None = None) -> Settlement | None:
    """How the attempt settles; ``None`` when the run is no longer this worker's to settle."""
    if token.reason == "X_JOB_TIMEOUT":
        # The worker failed the attempt when the deadline passed; this body ran on regardless.
        log.warning("jobs.timeout.abandoned job_id=%s name=%s queue=%s", claimed.id, claimed.name, claimed.queue)
        return None
    if error is None:
        try:
            encoded = jsoncodec.dumps(result, what=f"{claimed.name} result")
        except jsoncodec.NotJSON as exc:
            return _stop(handle, claimed, f"{exc}", X_JOB_RESULT_UNSERIALIZABLE, "terminal")
        return Settlement(claimed.id, claimed.claim, "done", result=encoded)
    if token.reason in ("X_DRAINING", "X_JOB_SLOT_LOST"):
        # Stopped by the drain (or a lost fleet slot): back to the queue at once, the attempt handed back.
        return Settlement(claimed.id, claimed.claim, "ready", uncount=True)
    if isinstance(error, JobCancelled) and token.is_set():
        log.warning("jobs.run.cancelled job_id=%s name=%s reason=%s", claimed.id, claimed.name, token.reason)
        return None
    text = format_error(error)
    code = getattr(error, "code", None)
    code = code if isinstance(code, str) and code else X_JOB_FAILED
    kind, retry_after = classify(error)
    if kind == "terminal":
        return _stop(handle, claimed, f"{text}\n({TERMINAL_NOTE})", code, "terminal")
    if claimed.attempt >= claimed.max_attempts:
        return _stop(handle, claimed, text, code, "attempts-exhausted")
    policy = handle.retry
    if retry_after is not None:
        delay = min(retry_after, policy.max_delay_seconds)
    else:
        delay = policy.delay_after(claimed.attempt)
    log.info("jobs.attempt.failed job_id=%s name=%s queue=%s attempt=%s retry_in=%.3fs code=%s", claimed.id,
             claimed.name, claimed.queue, claimed.attempt, delay, code)
    return Settlement(claimed.id, claimed.claim, "retry", last_error=text, error_code=code, delay=delay)


def _stop(handle: JobHandle, claimed: ClaimedJob, text: str, code: str, reason: str) -> Settlement:
    state = "dead" if handle.retry.dead_letter else "failed"
    log.warning("jobs.%s job_id=%s name=%s queue=%s attempt=%s stop_reason=%s code=%s",
                "dead_lettered" if state == "dead" else "dropped", claimed.id, claimed.name, claimed.queue,
                claimed.attempt, reason, code)
    return Settlement(claimed.id, claimed.claim, state, last_error=text, error_code=code, stop_reason=reason)


def format_error(error: BaseException) -> str:
    """The stored error: type, message and the traceback, capped so one row stays small, with
    secrets masked before they are ever written (``redact.redact_text``)."""
    text = redact_text("".join(traceback.format_exception(error)).strip()) or ""
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS // 2] + "\n...\n" + text[-MAX_ERROR_CHARS // 2:]
    return text.replace("\x00", "\\x00")


_thread_state = threading.local()
IDLE_HEALTH_CHECK = 1.0  # seconds a thread's connection may idle before it is checked


def prepare_connections() -> None:
    """Before a body: drop this thread's connections that went bad while the thread idled.

    Body threads keep their Django connections open across jobs (a per-job connect would cost
    more than most jobs). A connection cut while idle (a database restart, a PgBouncer or
    firewall timeout) would fail the next body and cost it an attempt, so one that sat idle
    longer than ``IDLE_HEALTH_CHECK`` is pinged first, and closed (Django re-dials on next use)
    if it does not answer. ``CONN_MAX_AGE`` above zero is honoured as in a request.
    """
    now = time.monotonic()
    last = getattr(_thread_state, "last_used", now)
    _thread_state.last_used = now
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        if conn.errors_occurred or now - last > IDLE_HEALTH_CHECK:
            if not conn.is_usable():
                conn.close()
            conn.errors_occurred = False
        elif conn.close_at is not None and now >= conn.close_at and conn.settings_dict.get("CONN_MAX_AGE"):
            conn.close()


def _release_broken_connections() -> None:
    """After a failed body, drop this thread's connections that the failure left unusable."""
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            continue
        if conn.errors_occurred and not conn.is_usable():
            conn.close()
