"""Internal: the one execution path: run one claimed attempt and decide how it settles.

``run_attempt`` (sync bodies, on a pool thread) and ``execute_async.run_attempt_async`` (``async
def`` bodies, on the worker's event-loop thread, their statements off the loop) build the context
(``ctx.step``, ``ctx.progress``), install the tenant context, call the body and hand the outcome
to ``verdict``: a suspension latched by the step runner settles ``suspended`` uncounted;
otherwise ``decide`` reads the error (``retry.classify``) and the policy, and a stop on a
``compensates=True`` job unwinds (``ultimate_jobs.runtime.compensation``) before it settles. The
last progress report is written, and the answer is an ``Outcome``: the settlement paired with
what runs once it landed (the ``on_settled`` delivery, or an event wait's re-check). Settlement
itself is the settler's, after this returns (the worker's, or the test runner's): it is never
part of the retry decision. The testing helpers call these same functions.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from django.db import connections

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.conf import get_settings
from ultimate_jobs.context import CancelToken, JobContext, running
from ultimate_jobs.db import store_for
from ultimate_jobs.db.store import ClaimedJob, Settlement, Store
from ultimate_jobs.errors import (
    X_DRAINING,
    X_JOB_COMPENSATION_FAILED,
    X_JOB_FAILED,
    X_JOB_RESULT_TOO_LARGE,
    X_JOB_RESULT_UNSERIALIZABLE,
    X_JOB_SLOT_LOST,
    X_JOB_TENANT_MISMATCH,
    X_JOB_TIMEOUT,
    X_STEP_OUTCOME_UNKNOWN,
    JobCancelled,
    Terminal,
)
from ultimate_jobs.inputs import NO_TENANT
from ultimate_jobs.retry import classify
from ultimate_jobs.runtime import on_settled
from ultimate_jobs.runtime.async_steps import AsyncStepAPI
from ultimate_jobs.runtime.compensation import forward_attempts, needs_unwind, unwind
from ultimate_jobs.runtime.compensation import resume as resume_unwind
from ultimate_jobs.runtime.failures import format_error
from ultimate_jobs.runtime.outcome import Outcome, plain
from ultimate_jobs.runtime.progress import Progress
from ultimate_jobs.runtime.steps import StepAPI, Steps, Suspension, engine_of
from ultimate_jobs.runtime.tenancy import tenant_context
from ultimate_jobs.tracing import job_span, record_error

if TYPE_CHECKING:
    from ultimate_jobs.handle import AnyJobHandle

log = logging.getLogger("ultimate_jobs")

TERMINAL_NOTE = "not retried: this code is classified terminal"


def build_context(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, store: Store | None = None,
                  executor: Executor | None = None) -> tuple[JobContext, dict[str, Any]]:
    """The body's ``ctx`` (with ``ctx.step`` and ``ctx.progress`` wired to ``store``) and its input;
    an ``async def`` body's step and progress calls run their statements on ``executor``.

    ``ctx.tenant_id`` is the tenant the run acts under (``run_tenant``), which the steps, the
    progress and ``on_settled`` see too; raise terminal ``X_JOB_TENANT_MISMATCH`` for a row whose
    tenant is not its input's.
    """
    store = store if store is not None else store_for(None)
    kwargs = jsoncodec.loads(claimed.payload)
    claimed = claimed._replace(tenant_id=run_tenant(handle, claimed, kwargs))
    ctx = JobContext(job_id=claimed.id, run_id=claimed.run_id, name=claimed.name, queue=claimed.queue,
                     attempt=claimed.attempt, max_attempts=forward_attempts(handle, claimed),
                     tenant_id=claimed.tenant_id, enqueued_by=claimed.enqueued_by, cancelled=token)
    engine = Steps(handle=handle, claimed=claimed, token=token, store=store)
    ctx.step = AsyncStepAPI(engine, executor=executor) if handle.is_async else StepAPI(engine)
    ctx._progress = Progress(store=store, claimed=claimed, token=token, executor=executor)
    return ctx, kwargs


def run_tenant(handle: AnyJobHandle, claimed: ClaimedJob, values: dict[str, Any]) -> str | None:
    """The tenant a run acts under: its input's ``tenant(...)``, as the declaration says now.

    A ``NO_TENANT`` job runs with no tenant even when its row holds one (the row's ``tenant_id``
    still namespaced its dedupe and buckets its limits). A row whose tenant is not its input's —
    written by hand, or queued before the declaration's rule changed — is refused before the body,
    terminally (``X_JOB_TENANT_MISMATCH``). An input the rule cannot render any more (it changed
    shape) runs under the row's tenant, logged ``jobs.tenant.unchecked``.
    """
    if handle.tenant is NO_TENANT:
        return None
    try:
        expected = handle.tenant_for(**values)
    except Exception as exc:  # noqa: BLE001 (the user's tenant rule, over the stored JSON form)
        log.warning("jobs.tenant.unchecked job_id=%s name=%s tenant=%s error=%r: the input's tenant could not be "
                    "rendered; the run acts under the row's", claimed.id, claimed.name, claimed.tenant_id,
                    type(exc).__name__ if handle.sensitive else exc)
        return claimed.tenant_id
    if claimed.tenant_id is not None and expected is not None and expected != claimed.tenant_id:
        raise Terminal(f"{claimed.name}: the row is queued for tenant {claimed.tenant_id!r} but its input belongs "
                       f"to {expected!r}; refused before the body.", code=X_JOB_TENANT_MISMATCH,
                       fix="Enqueue the job again for the input's own tenant; a queued row never changes tenant.")
    return expected


def attempt_span(claimed: ClaimedJob) -> contextlib.AbstractContextManager[Any]:
    """The attempt's OpenTelemetry span, a child of the enqueuer's (a no-op without opentelemetry)."""
    return job_span(name=claimed.name, job_id=claimed.id, queue=claimed.queue, attempt=claimed.attempt,
                    traceparent=claimed.traceparent)


def run_attempt(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, *,
                alias: str | None = None) -> Outcome | None:
    """Run one attempt of a sync body on this thread; answer how to settle it."""
    prepare_connections()
    store = store_for(alias)
    try:
        ctx, kwargs = build_context(handle, claimed, token, store)
    except Exception as error:  # an undecodable payload is the attempt's failure
        return plain(decide(handle, claimed, token, error=error))
    steps = engine_of(ctx.step)
    claimed = claimed._replace(tenant_id=ctx.tenant_id)  # the run's tenant, for on_settled too
    with attempt_span(claimed) as span:
        try:
            with tenant_context(claimed.tenant_id):
                outcome = _run_body(handle, claimed, token, ctx, kwargs, steps, span)
        except Exception as error:  # TENANT_CONTEXT failed to enter or exit (or the verdict broke): a failure
            record_error(span, error, sensitive=handle.sensitive)
            _release_broken_connections()
            outcome = plain(decide(handle, claimed, token, error=error))
        return _finish(handle, claimed, ctx, outcome)


def _run_body(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, ctx: JobContext,
              kwargs: dict[str, Any], steps: Steps, span: Any) -> Outcome | None:
    """The body (or the unwind it owes) inside the tenant context; the verdict on how it ended."""
    try:
        if handle.compensates and needs_unwind(handle, claimed, steps):
            return plain(_guarded_unwind(handle, claimed, token,
                                         lambda: resume_unwind(handle, claimed, ctx, kwargs)))
        with running(token):  # once cancelled, the body's own enqueues are refused
            result = handle.fn(ctx, **kwargs)
    except Suspension:
        result = None  # the step runner latched where and for how long
    except Exception as error:  # the body's failure is data for the retry decision
        record_error(span, error, sensitive=handle.sensitive)
        _release_broken_connections()
        return verdict(handle, claimed, token, steps, error=error)
    return verdict(handle, claimed, token, steps, result=result)


def verdict(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, steps: Steps, *, result: Any = None,
            error: Exception | None = None) -> Outcome | None:
    """The outcome of a body that ran: a suspension, the retry decision, then the unwind."""
    outcome, failure = forward_verdict(handle, claimed, token, steps, result=result, error=error)
    if failure is not None:
        outcome = plain(_guarded_unwind(handle, claimed, token, lambda: unwind(handle, claimed, steps, failure),
                                        failure))
    return outcome


def forward_verdict(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, steps: Steps, *,
                    result: Any = None, error: Exception | None = None) -> tuple[Outcome | None, Settlement | None]:
    """``verdict`` short of the unwind: ``(outcome, None)``, or ``(None, failure)`` for a
    ``compensates=True`` run that failed for good and unwinds first (``execute_async`` too)."""
    latched = steps.latched
    if isinstance(latched, Suspension):
        # The body suspended (even if it swallowed the suspension): hand the attempt back; an event
        # wait is checked again once that landed (a publish cannot wake a row still running).
        return Outcome(Settlement(claimed.id, claimed.claim, "suspended", delay=latched.delay, uncount=True),
                       after=_wake_check(steps, claimed) if latched.waiting else None), None
    if latched is not None and error is not latched:
        error = latched  # type: ignore[assignment]  # a swallowed terminal step error still ends the run
    outcome = decide(handle, claimed, token, result=result, error=error)
    if (outcome is not None and outcome.state in ("dead", "failed") and handle.compensates
            and outcome.error_code != X_STEP_OUTCOME_UNKNOWN):
        return None, outcome
    return plain(outcome), None


def _guarded_unwind(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken,
                    run: Callable[[], Settlement | None], failure: Settlement | None = None) -> Settlement | None:
    """Run an unwind; one that raises settles as ``unwind_interrupted`` says."""
    try:
        return run()
    except Exception as error:
        return unwind_interrupted(handle, claimed, token, error, failure)


def unwind_interrupted(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, error: Exception,
                       failure: Settlement | None = None) -> Settlement | None:
    """How an unwind that raised settles: one that is cancelled as a cancel (or a drain), and one
    that broke (a database error) back to the queue while the row has attempts: the next claim unwinds."""
    if isinstance(error, JobCancelled):
        return decide(handle, claimed, token, error=error)
    _release_broken_connections()
    log.warning("jobs.compensation.interrupted job_id=%s name=%s error=%r", claimed.id, claimed.name, error)
    if claimed.attempt >= claimed.max_attempts:
        return failure or _stop(handle, claimed, format_error(error, sensitive=handle.sensitive),
                                X_JOB_COMPENSATION_FAILED,
                                "attempts-exhausted")
    return Settlement(claimed.id, claimed.claim, "retry", last_error=failure.last_error if failure else
                      format_error(error, sensitive=handle.sensitive),
                      error_code=failure.error_code if failure else X_JOB_FAILED,
                      delay=handle.retry.delay_after(claimed.attempt))


def _finish(handle: AnyJobHandle, claimed: ClaimedJob, ctx: JobContext,
            outcome: Outcome | None) -> Outcome | None:
    """Write the last progress report, then attach what runs once the settle landed."""
    if outcome is None:
        return None
    ctx._progress.flush()
    return outcome if outcome.after is not None else on_settled.attach(handle, claimed, outcome.settlement)


def _wake_check(steps: Steps, claimed: ClaimedJob) -> Callable[[], None]:
    store = steps.store

    def check() -> None:
        store.job_wake_waiter(job_id=claimed.id, now=clock.sql_now())

    return check


def decide(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, *, result: Any = None,
           error: BaseException | None = None) -> Settlement | None:
    """How the attempt settles; ``None`` when the run is no longer this worker's to settle."""
    if token.reason == X_JOB_TIMEOUT:
        # The worker failed the attempt when the deadline passed. A body that stopped because of
        # it is the intended end; one that ran on and finished anyway is named.
        if not isinstance(error, JobCancelled):
            log.warning("jobs.timeout.abandoned job_id=%s name=%s queue=%s ended=%s", claimed.id, claimed.name,
                        claimed.queue, "returned" if error is None else type(error).__name__)
        return None
    if error is None:
        try:
            encoded = jsoncodec.dumps(result, max_bytes=get_settings().MAX_RESULT_BYTES, what=f"{claimed.name} result")
        except jsoncodec.TooLarge as exc:  # checked before the settle: an oversized result is never stored
            return _stop(handle, claimed, f"{exc}; the result was not stored.", X_JOB_RESULT_TOO_LARGE, "terminal")
        except jsoncodec.NotJSON as exc:
            return _stop(handle, claimed, f"{exc}", X_JOB_RESULT_UNSERIALIZABLE, "terminal")
        return Settlement(claimed.id, claimed.claim, "done", result=encoded)
    if token.reason in (X_DRAINING, X_JOB_SLOT_LOST):
        # Stopped by the drain (or a lost fleet slot): back to the queue at once, the attempt handed back.
        return Settlement(claimed.id, claimed.claim, "ready", uncount=True)
    if isinstance(error, JobCancelled) and token.is_set():
        log.warning("jobs.run.cancelled job_id=%s name=%s reason=%s", claimed.id, claimed.name, token.reason)
        return None
    text = format_error(error, sensitive=handle.sensitive)
    code = getattr(error, "code", None)
    code = code if isinstance(code, str) and code else X_JOB_FAILED
    kind, retry_after = classify(error)
    if kind == "terminal":
        return _stop(handle, claimed, f"{text}\n({TERMINAL_NOTE})", code, "terminal")
    if claimed.attempt >= forward_attempts(handle, claimed):
        return _stop(handle, claimed, text, code, "attempts-exhausted")
    policy = handle.retry
    if retry_after is not None:
        delay = min(retry_after, policy.max_delay_seconds)
    else:
        delay = policy.delay_after(claimed.attempt)
    log.info("jobs.attempt.failed job_id=%s name=%s queue=%s attempt=%s retry_in=%.3fs code=%s", claimed.id,
             claimed.name, claimed.queue, claimed.attempt, delay, code)
    return Settlement(claimed.id, claimed.claim, "retry", last_error=text, error_code=code, delay=delay)


def _stop(handle: AnyJobHandle, claimed: ClaimedJob, text: str, code: str, reason: str) -> Settlement:
    state = "dead" if handle.retry.dead_letter else "failed"
    log.warning("jobs.%s job_id=%s name=%s queue=%s attempt=%s stop_reason=%s code=%s",
                "dead_lettered" if state == "dead" else "dropped", claimed.id, claimed.name, claimed.queue,
                claimed.attempt, reason, code)
    return Settlement(claimed.id, claimed.claim, state, last_error=text, error_code=code, stop_reason=reason)


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
