"""The run context every job body receives first: ``ctx``.

Usage::

    @job(idempotency_key="{order_id}", tenant=NO_TENANT)
    def ship(ctx, *, order_id: int) -> None:
        for n, parcel in enumerate(parcels(order_id)):
            ctx.cancelled.check()                 # raises JobCancelled once cancelled
            ctx.progress(n, total=len(parcels))
            ...

``ctx`` carries ``job_id``, ``run_id``, ``name``, ``queue``, ``attempt`` (1-based),
``max_attempts``, ``final_attempt``, ``tenant_id`` (the tenant the run acts under: its input's
``tenant(...)``, None for a ``NO_TENANT`` job), ``enqueued_by``, ``cancelled`` (a
``CancelToken``), ``step`` (durable steps) and ``progress(done, total=None, note=None)``. In an
``async def`` body the step calls are coroutines and ``await ctx.progress(...)`` waits for the
write; a cancel there also cancels the body's task (``CancelToken.on_set``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ultimate_jobs.errors import (
    CODES,
    X_ABORTED,
    X_DRAINING,
    X_JOB_LEASE_LOST,
    X_JOB_SLOT_LOST,
    X_JOB_TIMEOUT,
    JobCancelled,
)

CANCEL_REASONS = (X_ABORTED, X_DRAINING, X_JOB_TIMEOUT, X_JOB_LEASE_LOST, X_JOB_SLOT_LOST)
_CAUSES = {
    X_ABORTED: "The run was cancelled.",
    X_DRAINING: "The worker is draining (SIGTERM); the run goes back to the queue uncounted.",
    X_JOB_TIMEOUT: "The run passed its timeout.",
    X_JOB_LEASE_LOST: "The run's lease was lost: the job was cancelled or reclaimed elsewhere.",
    X_JOB_SLOT_LOST: "The run's fleet concurrency slot was lost.",
}


class CancelToken:
    """Cooperative cancellation: Python cannot kill a thread, so a body asks."""

    __slots__ = ("_event", "_callbacks", "_lock", "reason", "detail", "step_deadline", "step_name")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        # Called once the token is set: how an ``async def`` body's task is cancelled (see
        # ``on_set``). Most tokens never get one.
        self._callbacks: list[Callable[[], object]] | None = None
        self.reason: str | None = None
        self.detail: str | None = None
        # While a step with a step_timeout runs: its deadline (time.monotonic()) and name, read by
        # whoever enforces deadlines (the worker's loop, the test runner), which sets the token.
        self.step_deadline: float | None = None
        self.step_name: str | None = None

    def set(self, reason: str, detail: str | None = None) -> bool:
        """Cancel with ``reason`` (one of ``CANCEL_REASONS``); the first reason wins. Answer if it was new."""
        if reason not in CODES:
            raise ValueError(f"unknown cancel reason {reason}")
        with self._lock:
            if self._event.is_set():
                return False
            self.reason, self.detail = reason, detail
            self._event.set()
            callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            callback()
        return True

    def on_set(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once the token is set, on the thread that sets it (at once when it
        is set already). The worker cancels an ``async def`` body's task this way."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks = [*(self._callbacks or ()), callback]
                return
        callback()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking early when cancelled; answer whether it is set."""
        return self._event.wait(timeout)

    def check(self) -> None:
        """Raise ``JobCancelled`` (with the reason's code) when the run was cancelled."""
        if self._event.is_set():
            raise self.error()

    def error(self) -> JobCancelled:
        code = self.reason or X_ABORTED
        return JobCancelled(code, self.detail or _CAUSES.get(code, "The run was cancelled."))

    def __bool__(self) -> bool:
        return self._event.is_set()

    def __repr__(self) -> str:
        return f"<CancelToken {self.reason or 'live'}>"


# The cancel token of the body this thread (or task) is running, if any: what refuses a cancelled
# body's own writes outside its steps (an enqueue, a published event).
_RUNNING: ContextVar[CancelToken | None] = ContextVar("ultimate_jobs_running_token", default=None)


@contextmanager
def running(token: CancelToken) -> Iterator[None]:
    """Run a job body under ``token`` in this thread (or task): see ``refuse_if_cancelled``."""
    reset = _RUNNING.set(token)
    try:
        yield
    finally:
        _RUNNING.reset(reset)


def refuse_if_cancelled(what: str) -> None:
    """Inside a body whose run was cancelled, raise ``JobCancelled`` with the cancel's reason code
    (``X_ABORTED``, ``X_DRAINING``, ``X_JOB_TIMEOUT``, ...): a cancelled body writes nothing, so
    its ``what`` (an enqueue, a published event) is refused. Outside a body, nothing."""
    token = _RUNNING.get()
    if token is not None and token.is_set():
        raise JobCancelled(token.reason or X_ABORTED, f"{what} refused: this run was cancelled ({token.reason}), "
                           "and a cancelled body writes nothing.")


@dataclass(slots=True, kw_only=True)
class JobContext:
    """What a running body knows about its run."""

    job_id: UUID
    run_id: UUID
    name: str
    queue: str
    attempt: int
    max_attempts: int
    tenant_id: str | None
    enqueued_by: str | None
    cancelled: CancelToken
    step: Any = None
    _progress: Any = field(default=None, repr=False)

    @property
    def final_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def progress(self, done: int | float, total: int | float | None = None, note: str | None = None) -> Reported:
        """Report progress; written at most once a second, and always once before the run settles.

        Answers a ``Reported``: an ``async def`` body may ``await ctx.progress(...)`` to wait until
        the write this report started (off the event loop) has landed; a ``def`` body ignores it.
        """
        if self._progress is None:
            return Reported()
        answer: Reported = self._progress(done, total, note)
        return answer


class Reported:
    """What ``ctx.progress`` answers: awaitable, for ``async def`` bodies.

    Awaiting it waits for the progress write the report started, if the throttle let it start
    one (a cancel of the awaiting body does not cancel the write). Ignoring it is fine: the
    newest report is written before the run settles either way.
    """

    __slots__ = ("_write",)

    def __init__(self, write: asyncio.Future[None] | None = None) -> None:
        self._write = write

    def __await__(self) -> Generator[Any, None, None]:
        if self._write is not None:
            yield from asyncio.shield(self._write).__await__()
