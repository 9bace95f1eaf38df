"""Internal: ``ctx.step`` of an ``async def`` body — the step calls as coroutines, over the one
step engine (``runtime.steps.Steps``).

Usage::

    @job(idempotency_key="fx:{day}", tenant=NO_TENANT, compensates=True)
    async def refresh_rates(ctx, *, day: str) -> dict:
        rates = await ctx.step.run("fetch", fetch_rates)               # an async def: on the loop
        await ctx.step.run("store", lambda: Rate.objects.bulk_create(rows(rates)), atomic=True)  # a def: on a thread
        await ctx.step.sleep("1h")
        await ctx.progress(1, total=2)
        return rates

The persistence, replay, suspension, compensation, timeout and cancel rules are the engine's,
because the engine does the work: every statement of a step (the run's one read, ``started``, the
checkpoint, a recorded failure, a sleep, a wait) is the engine's own call, sent off the event loop
(``runtime.aio.shielded``: a cancel lets a statement in flight land first). What differs is who
calls ``fn``:

- an ``async def`` ``fn`` (or a callable answering an awaitable) is awaited on the body's loop;
  a cancel reaches it as ``asyncio.CancelledError`` at its next ``await``, and nothing is stored
  for it (a ``once=True`` step so interrupted is ``started``: its outcome is unknown);
- a ``def`` ``fn`` runs off the loop, on a thread, inside the run's tenant context. A thread
  cannot be stopped: a cancel propagates at once and the thread's answer is dropped, except under
  a drain (``X_DRAINING``), which waits for it and records its checkpoint as the sync engine does,
  so the next worker does not repeat it;
- ``atomic=True`` takes a ``def`` only: ``fn`` and the checkpoint run on one thread inside the
  step's transaction (the engine's own atomic path). An ``async def`` with ``atomic=True`` is
  refused ``X_JOB_DECLARATION_INVALID`` (terminal) when the step is reached.

Steps of one body may run side by side (``asyncio.gather``): their statements take turns, their
``fn`` calls overlap, and each gets its ``seq`` in the order it reached the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, ParamSpec, TypeVar

from ultimate_jobs import faults, jsoncodec
from ultimate_jobs.context import JobContext
from ultimate_jobs.errors import X_DRAINING, X_JOB_DECLARATION_INVALID, Terminal
from ultimate_jobs.runtime.aio import finished, off_loop, shielded
from ultimate_jobs.runtime.event_schema import Schema
from ultimate_jobs.runtime.steps import StepFront, Steps, encode_output, engine_of, open_internal, open_run
from ultimate_jobs.runtime.tenancy import tenant_context
from ultimate_jobs.tracing import record_error, step_span

P = ParamSpec("P")
T = TypeVar("T")


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def``, a partial of one, or an object
    whose ``__call__`` is one."""
    call = type(fn).__call__ if callable(fn) and not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))


class AsyncStepAPI(StepFront):
    """``ctx.step`` of an ``async def`` body: ``await run(...)``, ``await sleep(...)``, ``await
    wait_for_event(...)`` (see the module); ``executor`` is where its sync calls run (None:
    asgiref's thread-sensitive thread)."""

    __slots__ = ("_executor", "_turn", "_clocks")

    def __init__(self, engine: Steps, *, executor: Executor | None = None) -> None:
        super().__init__(engine)
        self._executor = executor
        self._turn: asyncio.Lock | None = None  # see _take_turn
        self._clocks: dict[str, float] = {}  # step_timeout deadlines of the async steps running now

    async def run(self, name: str, fn: Callable[[], Any], *, once: bool = False, atomic: bool = False,
                  compensate: Callable[[Any], Any] | None = None) -> Any:
        """Run ``fn`` once ever for this run and answer its stored JSON form (``Steps.run``'s rules)."""
        engine = self._engine
        is_async = is_async_callable(fn)
        if atomic and is_async:
            raise engine._latch(Terminal(
                f"step {name!r}: atomic=True takes a def (Django's transactions are synchronous); fn is an "
                "async def.", code=X_JOB_DECLARATION_INVALID,
                fix="Pass a def that makes the ORM writes, or drop atomic=True."))
        if engine._rows is not None and not once:
            # The run's steps are read already and nothing is stored before fn: no statement, so
            # no trip off the loop (a step after the first costs its checkpoint's trip only).
            async with self._take_turn():
                seq, output = open_run(engine, name, fn, once=once, compensate=compensate)
        else:
            seq, output = await engine_call(self, open_run, engine, name, fn, once=once, compensate=compensate)
        if seq is not None:
            if atomic:  # the engine's own path: fn and the checkpoint in one transaction, on one thread
                text = await engine_call(self, engine._execute, name, seq, _refusing_awaitables(self._in_tenant(fn)),
                                         once=once, atomic=True)
            else:
                text = await self._execute(name, seq, fn, once=once, is_async=is_async)
            output = jsoncodec.loads(text)
        if compensate is not None:
            engine.compensators.append((name, compensate, output))
        return output

    async def sleep(self, name_or_duration: Any, duration: Any = None) -> None:
        """Suspend the run until ``duration`` has passed (on the database clock); no attempt burned."""
        await engine_call(self, self._engine.sleep, name_or_duration, duration)

    async def wait_for_event(self, name: str, event: str, match: dict[str, Any] | None = None,
                             timeout: Any = None, *, schema: Schema | None = None) -> Any:
        """Suspend until ``publish_event(event, payload)`` with ``payload`` containing ``match`` is
        published after the wait began; answer the payload (checked by ``schema``, as the sync
        call does), or ``None`` once ``timeout`` passed."""
        return await engine_call(self, functools.partial(self._engine.wait_for_event, schema=schema), name, event,
                                 match, timeout)

    # -- internals ---------------------------------------------------------------------------------

    def _take_turn(self) -> asyncio.Lock:
        """The lock the run's engine calls take turns on (made on the body's loop, at first use)."""
        if self._turn is None:
            self._turn = asyncio.Lock()
        return self._turn

    def _in_tenant(self, fn: Callable[[], T]) -> Callable[[], T]:
        """``fn`` as a ``def`` step runs on its thread: inside the run's tenant context, as the body."""
        tenant_id = self._engine.claimed.tenant_id

        def call() -> T:
            with tenant_context(tenant_id):
                return fn()

        return call

    async def _execute(self, name: str, seq: int, fn: Callable[[], Any], *, once: bool, is_async: bool) -> str:
        """``Steps._execute`` for a step whose ``fn`` is awaited here: inside the step's span."""
        with step_span(name) as span:
            try:
                return await self._checkpointed(name, seq, fn, once=once, is_async=is_async)
            except Exception as error:
                record_error(span, error, sensitive=self._engine.handle.sensitive)
                raise

    async def _checkpointed(self, name: str, seq: int, fn: Callable[[], Any], *, once: bool, is_async: bool) -> str:
        engine = self._engine
        faults.fault("before_step_body", step=name)
        self._clock(name, running=True)
        try:
            try:
                value = await (fn() if is_async else self._threaded(name, seq, fn, once=once))
                if inspect.isawaitable(value):  # a def answering a coroutine: lambda: fetch(url)
                    value = await value
            except Exception as error:  # fn's own failure: recorded, then the body decides
                await engine_call(self, engine._record_failure, name, seq, error, count=not once)
                raise
            text = encode_output(engine, name, value)
            faults.fault("after_step_body_before_checkpoint", step=name)
            stored = await engine_call(self, engine._complete, name, text, seq=seq, count=not once)
        finally:
            self._clock(name, running=False)
        faults.fault("after_checkpoint_commit", step=name)
        return stored

    async def _threaded(self, name: str, seq: int, fn: Callable[[], Any], *, once: bool) -> Any:
        """A ``def`` ``fn`` on a thread. Cancelled meanwhile: under a drain, wait for it and record
        what it did (its checkpoint or its failure), as a ``def`` body's drain would; else leave it."""
        call = asyncio.ensure_future(off_loop(self._executor, self._in_tenant(fn)))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            if self._engine.token.reason != X_DRAINING:
                call.add_done_callback(_retrieve)  # abandoned to its thread, like a timed-out def body
                raise
            await finished(call)
            with contextlib.suppress(Exception):
                await self._keep(name, seq, call, once=once)
            raise

    async def _keep(self, name: str, seq: int, call: asyncio.Future[Any], *, once: bool) -> None:
        engine = self._engine
        if call.cancelled():
            return
        error = call.exception()
        if isinstance(error, Exception):
            await engine_call(self, engine._record_failure, name, seq, error, count=not once)
        elif error is None and not inspect.isawaitable(call.result()):
            text = encode_output(engine, name, call.result())
            await engine_call(self, engine._complete, name, text, seq=seq, count=not once)

    def _clock(self, name: str, *, running: bool) -> None:
        """Publish the earliest ``step_timeout`` deadline of the steps running here on the token,
        where the worker's loop reads it (the engine does so for a ``def`` step it runs)."""
        timeout = self._engine.handle.step_timeout
        if timeout is None:
            return
        if running:
            self._clocks[name] = time.monotonic() + timeout
        else:
            self._clocks.pop(name, None)
        token = self._engine.token
        first = min(self._clocks, key=self._clocks.__getitem__, default=None)
        token.step_name, token.step_deadline = first, (None if first is None else self._clocks[first])


async def engine_call(api: AsyncStepAPI, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """One engine call of ``api``'s run, off the loop, one at a time; a cancel lets it land first."""
    async with api._take_turn():
        return await shielded(api._executor, fn, *args, **kwargs)


async def run_internal(api: AsyncStepAPI, name: str, fn: Callable[[], Any]) -> None:
    """``Steps.run_internal`` for an ``async def`` body's unwind: a compensator (``def`` or ``async
    def``) run as the framework step ``name`` through the same checkpoint path."""
    seq = await engine_call(api, open_internal, api._engine, name)
    if seq is not None:
        await api._execute(name, seq, fn, once=False, is_async=is_async_callable(fn))


def async_context(ctx: JobContext, executor: Executor | None = None) -> JobContext:
    """``ctx`` for an ``async def`` body run by a ``def`` job (a django.tasks ``async def`` task):
    the same run, its ``step`` the async front over the same engine."""
    ctx_copy = JobContext(job_id=ctx.job_id, run_id=ctx.run_id, name=ctx.name, queue=ctx.queue, attempt=ctx.attempt,
                          max_attempts=ctx.max_attempts, tenant_id=ctx.tenant_id, enqueued_by=ctx.enqueued_by,
                          cancelled=ctx.cancelled, _progress=ctx._progress)
    ctx_copy.step = AsyncStepAPI(engine_of(ctx.step), executor=executor)
    return ctx_copy


def _refusing_awaitables(fn: Callable[[], T]) -> Callable[[], T]:
    """An ``atomic=True`` ``def`` that answers a coroutine is an ``async def`` in disguise: refused."""

    @functools.wraps(fn)
    def call() -> T:
        value = fn()
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise Terminal("atomic=True: fn answered an awaitable; the transaction cannot span it.",
                           code=X_JOB_DECLARATION_INVALID, fix="Make the atomic step's fn a plain def.")
        return value

    return call


def _retrieve(call: asyncio.Future[Any]) -> None:
    if not call.cancelled():
        call.exception()
