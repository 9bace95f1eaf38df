"""Internal: the background roles ``jobs_worker`` runs beside its claim loop.

A role (the outbox relay, the scheduler) is a plain class with ``run()`` (loop until
``stop()``; return promptly once stopped, finishing the round or pass in flight) and ``stop()``.
``jobs_relay`` and ``jobs_scheduler`` run one role in the foreground; ``jobs_worker --roles``
runs each requested role on its own thread and stops them after the worker has drained.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from django.utils.module_loading import import_string

log = logging.getLogger("ultimate_jobs")

ROLE_CLASSES = {
    "relay": "ultimate_jobs.outbox.Relay",
    "scheduler": "ultimate_jobs.schedule.scheduler.Scheduler",
}
STOP_WAIT = 30.0


class Service(Protocol):
    def run(self) -> None: ...

    def stop(self) -> None: ...


def available_roles() -> list[str]:
    """Roles whose implementation is installed in this version."""
    found = []
    for role, path in ROLE_CLASSES.items():
        try:
            import_string(path)
        except ImportError:
            continue
        found.append(role)
    return found


def build(role: str) -> Service:
    cls = import_string(ROLE_CLASSES[role])
    return cls()  # type: ignore[no-any-return]


class BackgroundRoles:
    """Run roles on daemon threads; ``stop()`` asks each to stop and joins it (bounded)."""

    def __init__(self, roles: list[str]) -> None:
        self.services = {role: build(role) for role in roles}
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
