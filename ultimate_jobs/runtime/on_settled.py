"""``on_settled``: one hook for every way a run ends.

Usage::

    def report(settled: Settled) -> None:
        if settled.outcome == "completed":
            mark_synced(settled.input["account_id"], settled.result["rows"])
        else:                                   # "dead-lettered", "dropped" or "refused"
            mark_broken(settled.input["account_id"], settled.code)

    @job(idempotency_key="sync:{account_id}", tenant="{org}", on_settled=report, on_settled_timeout="10s")
    def sync_account(ctx, *, account_id: int, org: str) -> dict: ...

Outcomes: ``completed`` (the body returned and the settle landed; ``result`` is what it returned,
in its stored JSON form), ``dead-lettered`` (failed for good: ``state = "dead"``), ``dropped``
(failed for good on a ``Retry(dead_letter=False)`` job: ``state = "failed"``), ``refused`` (a busy
``Concurrency(when_busy="fail")`` key: the body never ran; ``code`` is ``X_JOB_KEY_BUSY``).
Never called for a retry, a suspension, a drain, a cancel, or a settle that did not land.

The hook runs after the settle statement answered that the row settled, under the job's tenant
(``TENANT_CONTEXT``), off the worker's claim loop. It gets three tries back to back, all inside
``on_settled_timeout`` (30 s): past it, ``settled.cancelled`` is set (``X_JOB_TIMEOUT``) and the
hook is abandoned. Delivery is at most once per ending — a worker killed between the settle and
the hook never runs it, so anything that must happen for certain belongs in a step. A hook that
keeps failing is logged with ``X_JOB_ON_SETTLED_FAILED``; the job's outcome never changes.
``async def`` hooks are run to completion on their own event loop.

Logged events: ``jobs.on_settled.failed`` (error, code ``X_JOB_ON_SETTLED_FAILED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import connections

from ultimate_jobs import jsoncodec
from ultimate_jobs.context import CancelToken
from ultimate_jobs.errors import X_JOB_KEY_BUSY, X_JOB_ON_SETTLED_FAILED, X_JOB_TIMEOUT
from ultimate_jobs.models import Job
from ultimate_jobs.runtime.outcome import Outcome
from ultimate_jobs.runtime.tenancy import tenant_context

if TYPE_CHECKING:
    from ultimate_jobs.db.store import ClaimedJob, Settlement
    from ultimate_jobs.handle import AnyJobHandle

log = logging.getLogger("ultimate_jobs")

TRIES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Settled:
    """How a run ended, as ``on_settled`` receives it."""

    outcome: str
    job_id: UUID
    run_id: UUID
    name: str
    queue: str
    tenant_id: str | None
    attempt: int
    input: dict[str, Any] | None
    result: Any = None
    error: str | None = None
    code: str | None = None
    cancelled: CancelToken = field(default_factory=CancelToken, compare=False)


def outcome_of(state: str, error_code: str | None) -> str | None:
    """The ``on_settled`` outcome of a settled state, or None when the state is no ending."""
    if state == "done":
        return "completed"
    if state == "dead":
        return "dead-lettered"
    if state == "failed":
        return "refused" if error_code == X_JOB_KEY_BUSY else "dropped"
    return None


def _input(payload: str | None) -> dict[str, Any] | None:
    try:
        value = jsoncodec.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def attach(handle: AnyJobHandle, claimed: ClaimedJob, settlement: Settlement) -> Outcome:
    """``settlement`` paired with the delivery of its ending to ``handle.on_settled``, run once the
    settle landed (nothing, for a job without the hook or a settlement that ends nothing)."""
    outcome = outcome_of(settlement.state, settlement.error_code)
    if handle.on_settled is None or outcome is None:
        return Outcome(settlement)
    settled = Settled(outcome=outcome, job_id=claimed.id, run_id=claimed.run_id, name=claimed.name,
                      queue=claimed.queue, tenant_id=claimed.tenant_id, attempt=claimed.attempt,
                      input=_input(claimed.payload),
                      result=jsoncodec.loads(settlement.result) if outcome == "completed" else None,
                      error=None if outcome == "completed" else settlement.last_error,
                      code=None if outcome == "completed" else settlement.error_code)
    return Outcome(settlement, after=functools.partial(deliver, handle, settled))


def for_row(handle: AnyJobHandle, job_id: UUID, *, database: str) -> Settled | None:
    """The ending of a row settled without an attempt (a lease lapsed on the final attempt)."""
    row = (Job.objects.using(database).filter(id=job_id)
           .values("run_id", "queue", "tenant_id", "attempt", "payload", "state", "last_error", "error_code").first())
    if row is None:
        return None
    outcome = outcome_of(row["state"], row["error_code"])
    if outcome is None:
        return None
    payload = row["payload"]
    return Settled(outcome=outcome, job_id=job_id, run_id=row["run_id"], name=handle.name, queue=row["queue"],
                   tenant_id=row["tenant_id"], attempt=row["attempt"],
                   input=payload if isinstance(payload, dict) else None, error=row["last_error"],
                   code=row["error_code"])


_inline = threading.local()


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """Deliver on the calling thread (the test runner: the test's transaction and its rows are
    visible to the hook); the timeout is then not enforced."""
    _inline.on = True
    try:
        yield
    finally:
        _inline.on = False


def deliver_rescued(handle: AnyJobHandle, job_id: UUID, database: str) -> None:
    """Deliver the ending of a row the rescue settled (a lease lapsed on its final attempt)."""
    ending = for_row(handle, job_id, database=database)
    if ending is not None:
        deliver(handle, ending)


def deliver(handle: AnyJobHandle, settled: Settled) -> bool:
    """Call the hook: up to three tries inside ``on_settled_timeout``; answer whether one succeeded."""
    deadline = time.monotonic() + handle.on_settled_timeout
    failure: BaseException | None = None
    for _ in range(TRIES):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        failure = _call_inline(handle, settled) if getattr(_inline, "on", False) else _try(handle, settled, remaining)
        if failure is None:
            return True
        if settled.cancelled.is_set():
            break  # timed out: the hook is abandoned, not tried again
    log.error("jobs.on_settled.failed code=%s job_id=%s name=%s outcome=%s error=%r", X_JOB_ON_SETTLED_FAILED,
              settled.job_id, settled.name, settled.outcome, failure)
    return False


def _try(handle: AnyJobHandle, settled: Settled, budget: float) -> BaseException | None:
    """One try on its own thread, so the budget holds even for a hook that never returns."""
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            with tenant_context(settled.tenant_id):
                answer = handle.on_settled(settled)  # type: ignore[misc]
                if inspect.isawaitable(answer):
                    asyncio.run(_awaited(answer))
            outcome.append(None)
        except Exception as exc:  # the hook's failure is reported, never raised into the worker
            outcome.append(exc)
        finally:
            connections.close_all()  # this thread ends here: close what the hook opened

    thread = threading.Thread(target=call, name=f"ultimate-jobs-on-settled-{settled.job_id}", daemon=True)
    thread.start()
    thread.join(budget)
    if thread.is_alive():
        settled.cancelled.set(X_JOB_TIMEOUT, f"on_settled passed its timeout of {handle.on_settled_timeout:g}s.")
        return TimeoutError(f"on_settled still running after {handle.on_settled_timeout:g}s")
    return outcome[0] if outcome else RuntimeError("on_settled ended without an answer")


def _call_inline(handle: AnyJobHandle, settled: Settled) -> BaseException | None:
    try:
        with tenant_context(settled.tenant_id):
            answer = handle.on_settled(settled)  # type: ignore[misc]
            if inspect.isawaitable(answer):
                asyncio.run(_awaited(answer))
    except Exception as exc:  # reported like a worker's try
        return exc
    return None


async def _awaited(answer: Any) -> None:
    await answer
