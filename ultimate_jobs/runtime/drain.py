"""Internal: the worker's drain — SIGTERM or ``Worker.stop()`` until the worker may exit.

The drain stops claiming at once and cancels every held attempt with its reason (``X_DRAINING``); the
loop keeps settling and renewing leases while attempts finish, for up to the drain timeout. At the
deadline, what finished is settled and the rest is abandoned to its lease (the rescue of any
worker that has the job's code hands it back once the lease lapsed).

Logged events: ``jobs.worker.drain-signalled``, ``jobs.worker.drain-abandoned``.
"""

from __future__ import annotations

import logging
import time

from ultimate_jobs.runtime.holdings import Holdings
from ultimate_jobs.runtime.settling import Settler
from ultimate_jobs.service_loop import ServiceLoop

log = logging.getLogger("ultimate_jobs")


class Drain:
    """One worker's drain; ``loop.stopping`` says whether it began."""

    def __init__(self, *, timeout: float, worker_id: str, holdings: Holdings, settler: Settler,
                 loop: ServiceLoop) -> None:
        self.timeout = timeout
        self.worker_id = worker_id
        self.holdings = holdings
        self.settler = settler
        self.loop = loop
        self.abandoned = 0  # attempts left to their leases at the deadline

    @property
    def draining(self) -> bool:
        return self.loop.stopping.is_set()

    def begin(self, reason: str) -> None:
        """Stop claiming and cancel every held run with ``reason``; the loop then drains."""
        first = not self.draining
        if first:
            self.loop.deadline = time.monotonic() + self.timeout
        self.loop.stop()  # claiming stops before any attempt is cancelled
        if first:
            log.info("jobs.worker.drain-signalled worker=%s in_flight=%s timeout=%.1fs", self.worker_id,
                     self.holdings.in_flight(), self.timeout)
        for attempt in list(self.holdings.attempts.values()):
            attempt.token.set(reason)

    def over(self) -> bool:
        """Whether the drain is done: every attempt settled, or the deadline passed (the rest abandoned)."""
        if not self.holdings.attempts and not self.holdings.pending:
            return True
        if self.loop.deadline is not None and time.monotonic() >= self.loop.deadline:
            self._abandon()
            return True
        return False

    def _abandon(self) -> None:
        """The deadline passed: settle what finished, leave the rest to their leases."""
        self.holdings.collect()
        self.settler.settle()
        abandoned = [str(r.id) for r in self.holdings.attempts.values() if not r.finished.is_set()]
        self.abandoned = len(abandoned) + len(self.holdings.abandoned)
        if abandoned:
            log.error("jobs.worker.drain-abandoned worker=%s abandoned=%s", self.worker_id, ",".join(abandoned))
