"""Internal: the threads a worker runs bodies and hooks on — a pool of daemon threads for sync
bodies (and the hooks run once a settle landed), one event-loop thread for ``async def`` bodies,
and beside that loop a pool for what those bodies run off the loop (their step statements, their
``def`` steps, their progress writes: ``runtime.aio.off_loop``).

Logged events: ``jobs.worker.task-failed``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from django.db import connections

log = logging.getLogger("ultimate_jobs")

P = ParamSpec("P")
T = TypeVar("T")


def run_and_close(task: Callable[[], object]) -> None:
    """A hook-pool task; the thread's connections are closed after it (these tasks are rare, and a
    connection idling in a hook thread would outlive the worker's own)."""
    try:
        task()
    finally:
        connections.close_all()


class Pool:
    """Daemon threads running sync bodies: a body that never returns cannot keep the process alive."""

    def __init__(self, size: int, prefix: str = "ultimate-jobs") -> None:
        self._tasks: queue_module.SimpleQueue[Callable[[], None] | None] = queue_module.SimpleQueue()
        self._threads = [threading.Thread(target=self._loop, name=f"{prefix}-{n}", daemon=True)
                         for n in range(size)]
        for thread in self._threads:
            thread.start()

    def _loop(self) -> None:
        try:
            while (task := self._tasks.get()) is not None:
                try:
                    task()
                except Exception:  # a task's failure is logged; the pool thread keeps serving
                    log.exception("jobs.worker.task-failed")
        finally:
            # The thread ends with the pool: close its connections now rather than whenever the
            # garbage collector gets to them (an in-process Worker must not leave sessions behind).
            connections.close_all()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def shutdown(self, wait: float = 0.0) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        deadline = time.monotonic() + wait
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class PoolExecutor(concurrent.futures.Executor):
    """A ``concurrent.futures.Executor`` over a ``Pool``: daemon threads whose Django connections are
    closed when the pool shuts down (a ``ThreadPoolExecutor``'s threads would leave them to the
    garbage collector). ``before`` runs ahead of each call on its thread (the worker's check of
    connections that went bad while the thread idled)."""

    def __init__(self, size: int, prefix: str, before: Callable[[], None] | None = None) -> None:
        self._pool = Pool(size, prefix)
        self._before = before

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                if self._before is not None:
                    self._before()
                result = fn(*args, **kwargs)
            except BaseException as exc:  # a Suspension or a crash is the caller's to see, not the pool's
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._pool.submit(run)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(1.0 if wait else 0.0)


class EventLoopThread:
    """One event-loop thread for ``async def`` bodies, started on first use, and the pool of
    ``size`` threads their off-loop calls run on (``executor``)."""

    def __init__(self, size: int = 1, before: Callable[[], None] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.executor = PoolExecutor(size, "ultimate-jobs-async-sync", before)
        self._thread = threading.Thread(target=self.loop.run_forever, name="ultimate-jobs-async", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop)

    def shutdown(self, wait: float = 0.0) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.executor._pool.shutdown(wait)
