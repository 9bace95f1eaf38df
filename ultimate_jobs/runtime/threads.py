"""Internal: the threads a worker runs bodies and hooks on — a pool of daemon threads for sync
bodies (and the hooks run once a settle landed), one event-loop thread for ``async def`` bodies.

Logged events: ``jobs.worker.task-failed``.
"""

from __future__ import annotations

import asyncio
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from django.db import connections

log = logging.getLogger("ultimate_jobs")


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


class EventLoopThread:
    """One event-loop thread for ``async def`` bodies, started on first use."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="ultimate-jobs-async", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop)

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
