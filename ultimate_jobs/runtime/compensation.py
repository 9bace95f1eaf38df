"""Compensation: undo the completed steps of a run that failed for good, last in first out.

Usage::

    @job(idempotency_key="checkout:{order_id}", tenant="{org}", compensates=True, retry=3)
    def checkout(ctx, *, order_id: int, org: str) -> None:
        charge = ctx.step.run("charge", lambda: gateway.charge(order_id),
                              compensate=lambda c: gateway.refund(c["id"]))
        ctx.step.run("reserve", lambda: stock.reserve(order_id),
                     compensate=lambda r: stock.release(r["id"]))
        ctx.step.run("ship", lambda: carrier.ship(order_id))      # fails for good -> release, refund

When: only once the run failed for good (its retry attempts spent, or a terminal error) — never
on a retry, a cancel, a drain or a suspension, and not for ``X_STEP_OUTCOME_UNKNOWN`` (that stop
waits for an operator to resolve the step). Order: last in, first out, each compensator as the
step ``compensate:<name>`` (a replay skips what already ran). Durable: the step ``unwinding``
(holding the original error) is written before the first compensator; any later attempt that
finds it replays the body only to re-register its compensators and continues the unwind — an
operator's retry continues the unwind too, never the forward path.

Options (default): ``@job(compensates=True)`` (False) is required for ``compensate=``; such a
row carries ``UNWIND_MARGIN`` (2) attempts past ``retry.attempts``, so a crash or a timeout on
the final attempt is claimed again and unwinds; two more lapses bury it.

A compensator that raises sends the row back while attempts remain, then dead-letters it with
``X_JOB_COMPENSATION_FAILED`` naming the step. A ``once=True`` step whose outcome is unknown
stops the unwind at once with ``X_JOB_COMPENSATION_FAILED``: resolve the step, then retry. When
the unwind is done the row ends with its original error.

An ``async def`` body unwinds the same way (``resume_async``, ``unwind_async``): its compensators
may be ``def`` (run on a thread, in the run's tenant context) or ``async def`` (awaited).

Logged events: ``jobs.compensation.started``, ``jobs.compensation.done`` (info),
``jobs.compensation.failed`` (warning).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.db.store import FENCED_OUT, Settlement
from ultimate_jobs.errors import X_JOB_COMPENSATION_FAILED, X_LEASE_LAPSED, X_STEP_OUTCOME_UNKNOWN, JobCancelled
from ultimate_jobs.handle import UNWIND_MARGIN, AnyJobHandle
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.async_steps import AsyncStepAPI, engine_call, run_internal
from ultimate_jobs.runtime.failures import format_error
from ultimate_jobs.runtime.steps import COMPENSATE_PREFIX, UNWIND_STEP, ReplayEnd, Suspension, engine_of

if TYPE_CHECKING:
    from ultimate_jobs.context import JobContext
    from ultimate_jobs.db.store import ClaimedJob, Store
    from ultimate_jobs.runtime.steps import Steps

log = logging.getLogger("ultimate_jobs")

__all__ = ["UNWIND_MARGIN", "defer", "forward_attempts", "needs_unwind", "resume", "resume_async", "unwind",
           "unwind_async"]


def forward_attempts(handle: AnyJobHandle, claimed: ClaimedJob) -> int:
    """The attempts the forward path may spend: the row's, less the unwind's margin."""
    return max(1, claimed.max_attempts - (UNWIND_MARGIN if handle.compensates else 0))


def needs_unwind(handle: AnyJobHandle, claimed: ClaimedJob, steps: Steps) -> bool:
    """Whether this attempt unwinds instead of running forward."""
    return handle.compensates and (UNWIND_STEP in steps.load() or claimed.attempt > forward_attempts(handle, claimed))


def stop(handle: AnyJobHandle, claimed: ClaimedJob, text: str, code: str, reason: str) -> Settlement:
    state = "dead" if handle.retry.dead_letter else "failed"
    return Settlement(claimed.id, claimed.claim, state, last_error=text, error_code=code, stop_reason=reason)


def resume(handle: AnyJobHandle, claimed: ClaimedJob, ctx: JobContext, kwargs: dict[str, Any]) -> Settlement | None:
    """An attempt that unwinds: replay the body to re-register its compensators, then unwind."""
    steps = engine_of(ctx.step)
    failure = _original_failure(handle, claimed, steps)
    steps.replay_only = True
    try:
        handle.fn(ctx, **kwargs)
    except (ReplayEnd, Suspension):
        pass  # the replay reached what never ran: every compensator that applies is registered
    except Exception:  # the body failed where it failed before: what it registered is what ran
        pass
    finally:
        steps.replay_only = False
    return unwind(handle, claimed, steps, failure)


def unwind(handle: AnyJobHandle, claimed: ClaimedJob, steps: Steps, failure: Settlement) -> Settlement | None:
    """Undo ``steps.compensators`` in reverse and answer how the attempt settles; ``failure`` is
    the stop the forward path decided (what the row ends with once the unwind is done)."""
    ended = _unwind_start(handle, claimed, steps, failure)
    if ended is not None:
        return ended
    for name, undo, output in reversed(steps.compensators):
        try:
            steps.run_internal(COMPENSATE_PREFIX + name, functools.partial(undo, output))
        except JobCancelled:
            raise
        except Exception as exc:  # a compensator failed: back to the queue while attempts remain
            return _compensator_failed(handle, claimed, name, exc, failure)
    log.info("jobs.compensation.done job_id=%s name=%s", claimed.id, claimed.name)
    return failure


async def resume_async(handle: AnyJobHandle, claimed: ClaimedJob, ctx: JobContext,
                       kwargs: dict[str, Any]) -> Settlement | None:
    """``resume`` for an ``async def`` body: its statements off the loop, its compensators awaited."""
    api: AsyncStepAPI = ctx.step
    steps = engine_of(api)
    failure = await engine_call(api, _original_failure, handle, claimed, steps)
    steps.replay_only = True
    try:
        await handle.fn(ctx, **kwargs)
    except (ReplayEnd, Suspension):
        pass  # the replay reached what never ran: every compensator that applies is registered
    except Exception:  # the body failed where it failed before: what it registered is what ran
        pass
    finally:
        steps.replay_only = False
    return await unwind_async(handle, claimed, api, failure)


async def unwind_async(handle: AnyJobHandle, claimed: ClaimedJob, api: AsyncStepAPI,
                       failure: Settlement) -> Settlement | None:
    """``unwind`` for an ``async def`` body: the same order and marks; a compensator may be a
    ``def`` (run on a thread) or an ``async def`` (awaited)."""
    steps = engine_of(api)
    ended = await engine_call(api, _unwind_start, handle, claimed, steps, failure)
    if ended is not None:
        return ended
    for name, undo, output in reversed(steps.compensators):
        try:
            await run_internal(api, COMPENSATE_PREFIX + name, functools.partial(undo, output))
        except JobCancelled:
            raise
        except Exception as exc:  # a compensator failed: back to the queue while attempts remain
            return _compensator_failed(handle, claimed, name, exc, failure)
    log.info("jobs.compensation.done job_id=%s name=%s", claimed.id, claimed.name)
    return failure


def _unwind_start(handle: AnyJobHandle, claimed: ClaimedJob, steps: Steps, failure: Settlement) -> Settlement | None:
    """Before the first compensator: the settlement to end with at once (an unknown step outcome,
    nothing to undo), else None once ``unwinding`` is stored."""
    latched = steps.latched
    steps.latched = None
    if getattr(latched, "code", None) == X_STEP_OUTCOME_UNKNOWN:
        return stop(handle, claimed, f"the unwind stopped: {getattr(latched, 'cause', latched)}\n\noriginal failure:\n"
                    f"{failure.last_error}", X_JOB_COMPENSATION_FAILED, failure.stop_reason or "terminal")
    if not steps.compensators:
        return failure
    if UNWIND_STEP not in steps.load():
        log.info("jobs.compensation.started job_id=%s name=%s steps=%s", claimed.id, claimed.name,
                 ",".join(name for name, _, _ in steps.compensators))
        steps.mark(UNWIND_STEP, {"error": failure.last_error, "code": failure.error_code,
                                 "stop_reason": failure.stop_reason})
    return None


def _compensator_failed(handle: AnyJobHandle, claimed: ClaimedJob, name: str, exc: Exception,
                        failure: Settlement) -> Settlement:
    log.warning("jobs.compensation.failed job_id=%s name=%s step=%s attempt=%s/%s error=%r", claimed.id,
                claimed.name, name, claimed.attempt, claimed.max_attempts,
                type(exc).__name__ if handle.sensitive else exc)
    if claimed.attempt < claimed.max_attempts:
        return Settlement(claimed.id, claimed.claim, "retry", last_error=failure.last_error,
                          error_code=failure.error_code, delay=handle.retry.delay_after(claimed.attempt))
    failed = format_error(exc, sensitive=handle.sensitive)
    return stop(handle, claimed, f"the compensator of step {name!r} failed: {failed}\n\n"
                f"original failure:\n{failure.last_error}", X_JOB_COMPENSATION_FAILED,
                failure.stop_reason or "attempts-exhausted")


def defer(handle: AnyJobHandle, claimed: ClaimedJob, store: Store, failure: Settlement) -> Settlement:
    """A stop decided outside the body's thread (the worker failing a timed-out attempt): write
    ``unwinding`` and hand the row back at once, so the next claim unwinds."""
    if not handle.compensates or failure.state not in ("dead", "failed"):
        return failure
    marker = jsoncodec.dumps({"error": failure.last_error, "code": failure.error_code,
                              "stop_reason": failure.stop_reason}, what=UNWIND_STEP)
    seq = max((row.seq for row in store.step_list(run_id=claimed.run_id, now=clock.sql_now())), default=0) + 1
    verdict = store.step_complete(job_id=claimed.id, claim=claimed.claim, run_id=claimed.run_id, name=UNWIND_STEP,
                                  seq=seq, output=marker, count=False, now=clock.sql_now())
    if verdict == FENCED_OUT:
        return failure  # the row is not ours: the settle is fenced out as well
    return Settlement(claimed.id, claimed.claim, "retry", last_error=failure.last_error,
                      error_code=failure.error_code, delay=0.0)


def _original_failure(handle: AnyJobHandle, claimed: ClaimedJob, steps: Steps) -> Settlement:
    """The failure the unwind ends with: stored in ``unwinding``, else the row's last error
    (a final attempt that crashed or timed out before it could write the marker)."""
    row = steps.load().get(UNWIND_STEP)
    if row is not None and row.output:
        data = jsoncodec.loads(row.output)
        return stop(handle, claimed, data.get("error") or "", data.get("code") or X_LEASE_LAPSED,
                    data.get("stop_reason") or "attempts-exhausted")
    found = (Job.objects.using(steps.store.alias).filter(id=claimed.id)
             .values_list("last_error", "error_code").first())
    text, code = found if found is not None else (None, None)
    return stop(handle, claimed, text or "the final attempt ended without settling (its worker died or timed out)",
                code or X_LEASE_LAPSED, "attempts-exhausted")
