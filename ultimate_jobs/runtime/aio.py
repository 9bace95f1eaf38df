"""Internal: what ``async def`` bodies need from the runtime — sync calls run off the event loop,
and the body's task cancelled by its cancel token.

``off_loop(executor, fn, ...)`` runs a sync call (a store statement, a ``def`` step, a progress
write) on a thread and awaits it without blocking the loop. The thread is the worker's: its pool
of body threads for ``async def`` bodies (``threads.PoolExecutor``, one Django connection each,
closed when the worker stops). With no worker executor (the test runner, a django.tasks ``async
def`` task run by a ``def`` job) it is asgiref's thread-sensitive thread, which under
``async_to_sync`` is the calling thread itself: the statements share its connection, and so its
transaction in a test — Django's own rule for the ORM from async code.

``shielded(executor, fn, ...)`` is ``off_loop`` whose call always runs to its end: a cancel of
the awaiting task waits for the call to return (a thread cannot be stopped, and the step engine
is used by one call at a time), then propagates.

``run_body(token, coroutine)`` runs an ``async def`` body as its own task and cancels that task
once ``token`` is set (a cancel, the drain, a timeout, a lost lease): ``asyncio.CancelledError``
at the body's next ``await``, the token already set when it arrives. A body that ends by that
cancel answers ``token.error()`` (``JobCancelled`` with the reason), which the retry decision
reads as it reads a ``def`` body's ``JobCancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from ultimate_jobs.context import CancelToken

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(executor: Executor | None, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on ``executor`` (else asgiref's thread-sensitive thread), with this
    task's context variables; the loop runs other coroutines meanwhile."""
    if executor is None:
        return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(executor, call)


async def shielded(executor: Executor | None, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``off_loop``, but a cancel of the awaiting task lets the call finish before it propagates
    (a call still queued is dropped: it never ran)."""
    if executor is None:
        call = asyncio.ensure_future(off_loop(executor, fn, *args, **kwargs))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            await finished(call)
            raise
    # The worker's path, taken per statement: the executor's own future, no task or shield around it.
    submitted = executor.submit(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
    try:
        return await asyncio.wrap_future(submitted)
    except asyncio.CancelledError:
        if not submitted.cancelled():
            await finished(asyncio.wrap_future(submitted))
        raise


async def finished(call: asyncio.Future[Any]) -> None:
    """Wait for ``call`` to end, however it ends (its exception is retrieved, not raised)."""
    await asyncio.wait([call])
    if not call.cancelled():
        call.exception()


def _cancel_soon(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop already closed: the body is over
        loop.call_soon_threadsafe(task.cancel)


async def run_body(token: CancelToken, body: Coroutine[Any, Any, T]) -> T:
    """Await ``body`` as its own task, cancelled once ``token`` is set; raise ``token.error()``
    when it ended by that cancel, and a ``RuntimeError`` when something else cancelled it."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(body)
    token.on_set(functools.partial(_cancel_soon, loop, task))
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            task.cancel()
            raise  # the caller itself is being cancelled (the worker stops): not the body's ending
        if token.is_set():
            raise token.error() from None
        raise RuntimeError("the body's task was cancelled (asyncio.CancelledError) while its run was not") from None
