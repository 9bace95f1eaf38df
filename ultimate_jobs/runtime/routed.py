"""Internal: one worker process serving queues that live on several databases (``QUEUE_DATABASES``).

Usage::

    workers = RoutedWorkers({"default": Worker(queues=["default"], database="default"),
                             "jobs_emails": Worker(queues=["emails"], database="jobs_emails")})
    workers.run()          # until SIGTERM drains them all (or, burst, until each is idle)

One claim loop per alias (``Worker``: its own store, LISTEN connection, leases, rescue and
settles, all on that alias), each on its own thread. The first SIGTERM/SIGINT drains every loop
at once; a second exits at once, as a lone worker does.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ultimate_jobs.errors import X_DRAINING
from ultimate_jobs.runtime.worker import Worker

log = logging.getLogger("ultimate_jobs")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class RoutedWorkers:
    """Several ``Worker``s, one per database alias, run and drained together; see the module docstring."""

    def __init__(self, workers: Mapping[str, Worker]) -> None:
        self.workers = dict(workers)
        self._signals = 0

    def stop(self, reason: str = X_DRAINING) -> None:
        for worker in self.workers.values():
            worker.stop(reason)

    def _handle(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("jobs.worker.killed signal=%s: second signal, exiting at once", signum)
            os._exit(1)
        self.stop(X_DRAINING)

    def _run(self, alias: str, worker: Worker) -> None:
        try:
            worker.run(install_signals=False)
        except Exception:  # one database's loop failing must not leave the others undrained
            log.exception("jobs.worker.crashed database=%s", alias)
            self.stop(X_DRAINING)

    def run(self) -> dict[str, int]:
        """Run every loop until stopped; answer the counts summed over the loops."""
        on_main = threading.current_thread() is threading.main_thread()
        previous = {s: signal.signal(s, self._handle) for s in _SIGNALS} if on_main else {}
        threads = [threading.Thread(target=self._run, args=(alias, worker), name=f"ultimate-jobs-worker-{alias}",
                                    daemon=True) for alias, worker in self.workers.items()]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():  # a bounded join, so the signal handler runs promptly
                    thread.join(0.2)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        total: dict[str, int] = {}
        for worker in self.workers.values():  # a loop that crashed still has its counts so far
            for key, value in worker.stats.items():
                total[key] = total.get(key, 0) + value
        return total


class SharedBurst:
    """The burst loops' ``on_idle``: one set of relay passes shared by every loop, run under one
    lock. A relay on one database may publish into another's, so a loop passes again when any
    pass published since it last asked, and no pass runs beside another (a loop finding nothing
    claimable means nothing staged was held by a pass in flight)."""

    def __init__(self, passes: list[Callable[[], bool]]) -> None:
        self.passes = passes
        self._lock = threading.Lock()
        self._published = 0
        self._seen: dict[int, int] = {}

    def for_loop(self) -> Callable[[], bool]:
        key = len(self._seen)
        self._seen[key] = 0

        def on_idle() -> bool:
            with self._lock:
                if any([burst_pass() for burst_pass in self.passes]):
                    self._published += 1
                fresh = self._seen[key] != self._published
                self._seen[key] = self._published
                return fresh
        return on_idle
