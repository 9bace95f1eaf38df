"""Internal: one attempt of an ``async def`` body — ``execute.run_attempt``'s twin on an event loop.

The same path as a ``def`` body's: the context (``ctx.step`` is ``async_steps.AsyncStepAPI`` over
the same step engine), the tenant context, the body, the verdict (``execute.forward_verdict``: a
suspension, the retry decision), the unwind a ``compensates=True`` run owes (``compensation.
resume_async`` / ``unwind_async``), the last progress report, ``on_settled``. What differs: every
statement runs off the loop (``executor``: the worker's pool beside its loop; None: asgiref's
thread-sensitive thread, the test runner's own thread under ``async_to_sync``), and the body runs
as its own task, cancelled once its cancel token is set (``runtime.aio.run_body``).
"""

from __future__ import annotations

from collections.abc import Coroutine
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from ultimate_jobs.context import CancelToken, JobContext
from ultimate_jobs.db import store_for
from ultimate_jobs.db.store import ClaimedJob, Settlement
from ultimate_jobs.runtime import on_settled
from ultimate_jobs.runtime.aio import run_body
from ultimate_jobs.runtime.async_steps import AsyncStepAPI, engine_call
from ultimate_jobs.runtime.compensation import needs_unwind, resume_async, unwind_async
from ultimate_jobs.runtime.execute import attempt_span, build_context, decide, forward_verdict, unwind_interrupted
from ultimate_jobs.runtime.outcome import Outcome, plain
from ultimate_jobs.runtime.steps import Suspension, engine_of
from ultimate_jobs.runtime.tenancy import tenant_context
from ultimate_jobs.tracing import record_error

if TYPE_CHECKING:
    from ultimate_jobs.handle import AnyJobHandle


async def run_attempt_async(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, *,
                            alias: str | None = None, executor: Executor | None = None) -> Outcome | None:
    """Run one attempt of an ``async def`` body on this event loop; answer how to settle it."""
    try:
        ctx, kwargs = build_context(handle, claimed, token, store_for(alias), executor=executor)
    except Exception as error:  # an undecodable payload is the attempt's failure
        decided = decide(handle, claimed, token, error=error)
        return None if decided is None else on_settled.attach(handle, claimed, decided)
    claimed = claimed._replace(tenant_id=ctx.tenant_id)  # the run's tenant, for on_settled too
    with attempt_span(claimed) as span:
        try:
            with tenant_context(claimed.tenant_id):
                outcome = await _run_body(handle, claimed, token, ctx, kwargs, span)
        except Exception as error:  # TENANT_CONTEXT failed to enter or exit (or the verdict broke): a failure
            record_error(span, error, sensitive=handle.sensitive)
            outcome = plain(decide(handle, claimed, token, error=error))
    if outcome is None:
        return None
    await ctx._progress.aflush()  # the last progress report, written off the loop
    return outcome if outcome.after is not None else on_settled.attach(handle, claimed, outcome.settlement)


async def _run_body(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, ctx: JobContext,
                    kwargs: dict[str, Any], span: Any) -> Outcome | None:
    """The body (or the unwind it owes) inside the tenant context; the verdict on how it ended."""
    api: AsyncStepAPI = ctx.step
    try:
        if handle.compensates and await engine_call(api, needs_unwind, handle, claimed, engine_of(api)):
            return plain(await _guarded_unwind(handle, claimed, token, resume_async(handle, claimed, ctx, kwargs)))
        result = await run_body(token, handle.fn(ctx, **kwargs))
    except Suspension:
        result = None  # the step runner latched where and for how long
    except Exception as error:  # the body's failure is data for the retry decision
        record_error(span, error, sensitive=handle.sensitive)
        return await _verdict(handle, claimed, token, api, error=error)
    return await _verdict(handle, claimed, token, api, result=result)


async def _verdict(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken, api: AsyncStepAPI, *,
                   result: Any = None, error: Exception | None = None) -> Outcome | None:
    """``execute.verdict`` with the unwind awaited."""
    outcome, failure = forward_verdict(handle, claimed, token, engine_of(api), result=result, error=error)
    if failure is not None:
        outcome = plain(await _guarded_unwind(handle, claimed, token, unwind_async(handle, claimed, api, failure),
                                              failure))
    return outcome


async def _guarded_unwind(handle: AnyJobHandle, claimed: ClaimedJob, token: CancelToken,
                          unwinding: Coroutine[Any, Any, Settlement | None],
                          failure: Settlement | None = None) -> Settlement | None:
    try:
        return await unwinding
    except Exception as error:
        return unwind_interrupted(handle, claimed, token, error, failure)
