"""Internal: the background roles ``jobs_worker`` runs beside its claim loop.

A role (the outbox relay, the scheduler) is a plain class with ``run()`` (loop until
``stop()``; return promptly once stopped, finishing the round or pass in flight) and ``stop()``.
``jobs_relay`` and ``jobs_scheduler`` run one role in the foreground; ``jobs_worker --roles``
builds each requested role and runs it here, on its own thread, stopping them after the worker
has drained.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Protocol

log = logging.getLogger("ultimate_jobs")

STOP_WAIT = 30.0


class Service(Protocol):
    def run(self) -> Any: ...

    def stop(self) -> None: ...


class BackgroundRoles:
    """Run roles on daemon threads; ``stop()`` asks each to stop and joins it (bounded)."""

    def __init__(self, services: Mapping[str, Service]) -> None:
        self.services = dict(services)
        self.threads: dict[str, threading.Thread] = {}

    def start(self) -> None:
        for role, service in self.services.items():
            thread = threading.Thread(target=self._run, args=(role, service), name=f"ultimate-jobs-{role}",
                                      daemon=True)
            self.threads[role] = thread
            thread.start()

    @staticmethod
    def _run(role: str, service: Service) -> None:
        try:
            service.run()
        except Exception:  # a crashed role is logged; the worker keeps running jobs
            log.exception("jobs.%s.crashed", role)

    def stop(self) -> None:
        for service in self.services.values():
            service.stop()
        for role, thread in self.threads.items():
            thread.join(STOP_WAIT)
            if thread.is_alive():
                log.error("jobs.%s.stop-abandoned: still running after %.0fs", role, STOP_WAIT)
