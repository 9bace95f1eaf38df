"""Internal: the worker's heartbeat — lease renewal and the rescue of lapsed leases.

Every ``HEARTBEAT_INTERVAL`` one statement renews the lease of every held attempt (fenced on owner and
claim token), and the fleet slots of held attempts and of timed-out bodies still running; an attempt whose
row no longer matches, or that went a whole visibility window without a landed renewal, has its
token set (``X_JOB_LEASE_LOST``). Lost leases are counted once the database answers again, then
the presence row is refreshed. About once a second, rows of registered jobs whose lease lapsed
(their worker died or stalled) are handed back (``Store.job_rescue``), their ``on_settled``
delivered when that ended them.

Logged events: ``jobs.heartbeat.failed``, ``jobs.lease.lost``, ``jobs.lease.rescued`` (a lapsed
lease handed back for another attempt), ``jobs.claim.exhausted`` (one that lapsed on the final
attempt, settled dead or failed), ``jobs.rescue.failed``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from uuid import UUID

from ultimate_jobs import clock
from ultimate_jobs.db import Store, close_connection
from ultimate_jobs.errors import X_JOB_LEASE_LOST, db_error_note
from ultimate_jobs.registry import get_job_handle, registered_jobs
from ultimate_jobs.runtime import on_settled
from ultimate_jobs.runtime.holdings import Attempt, Holdings
from ultimate_jobs.runtime.presence import Presence
from ultimate_jobs.runtime.settling import Settler
from ultimate_jobs.runtime.slots import FleetSlots

log = logging.getLogger("ultimate_jobs")

RESCUE_INTERVAL = 1.0
LOST_KEPT = 1000  # lost leases kept for the next heartbeat while they cannot be counted


class Heartbeat:
    """Keeps one worker's leases: renews them, notices lost ones, rescues lapsed ones."""

    def __init__(self, *, store: Store, alias: str, worker_id: str, visibility: float, interval: float,
                 holdings: Holdings, slots: FleetSlots, presence: Presence, settler: Settler,
                 on_db_error: Callable[[str, BaseException], None],
                 db_errors: tuple[type[Exception], ...]) -> None:
        self.store = store
        self.alias = alias
        self.worker_id = worker_id
        self.visibility = visibility
        self.interval = interval
        self.holdings = holdings
        self.slots = slots
        self.presence = presence
        self.settler = settler
        self._on_db_error = on_db_error
        self._db_errors = db_errors
        self._last_heartbeat = time.monotonic()
        self._last_rescue = 0.0
        self._lost: list[tuple[UUID, str, str]] = []  # lost leases not yet counted

    def keep(self) -> bool:
        """Heartbeat and rescue, each when due; answer whether the rescue made rows runnable again."""
        now = time.monotonic()
        if now - self._last_heartbeat >= self.interval:
            self.beat()
        if now - self._last_rescue >= RESCUE_INTERVAL:
            return self.rescue()
        return False

    def beat(self) -> None:
        held = [r for r in self.holdings.attempts.values() if not r.settled]
        # A timed-out body that runs on keeps its fleet slot until it returns (its row is settled).
        overrunning = [r for r in self.holdings.abandoned if r.slot is not None]
        self._last_heartbeat = time.monotonic()
        if not held:
            if overrunning:
                self._renew_slots(overrunning)
            self.presence.beat([])
            return
        before = time.monotonic()
        try:
            renewed = self.store.job_heartbeat(held=[(r.id, r.claimed.claim) for r in held],
                                               worker_id=self.worker_id, visibility=self.visibility,
                                               now=clock.sql_now())
        except self._db_errors as exc:
            log.warning("jobs.heartbeat.failed worker=%s held=%s error=%r%s", self.worker_id, len(held), exc,
                        db_error_note(exc))
            close_connection(self.alias)
            after = time.monotonic()
            for attempt in held:
                # Asked on both sides of the call: a whole window with no landed renewal is a lost lease.
                if before - attempt.renewed >= self.visibility or after - attempt.renewed >= self.visibility:
                    self._lose(attempt, "No lease renewal landed for a whole visibility window.")
            return
        self._renew_slots(held + overrunning)
        for attempt in held:
            if attempt.id in renewed:
                attempt.renewed = before
            elif not attempt.finished.is_set():
                self._lose(attempt, "The job was cancelled or reclaimed by another worker.")
        # Counted once the database answers again (a lost lease is often a lost connection).
        lost, self._lost = self._lost, []
        if not self.presence.lease_lost(lost):
            self._lost = lost[-LOST_KEPT:]  # kept (bounded) for the next heartbeat
        self.presence.beat([r.id for r in held])  # after the renewal: the leases come first

    def _renew_slots(self, attempts: list[Attempt]) -> None:
        try:
            self.slots.renew(attempts)
        except self._db_errors as exc:
            log.warning("jobs.heartbeat.failed worker=%s slots error=%r%s", self.worker_id, exc, db_error_note(exc))

    def _lose(self, attempt: Attempt, detail: str) -> None:
        if attempt.token.set(X_JOB_LEASE_LOST, detail):
            log.error("jobs.lease.lost job_id=%s name=%s queue=%s", attempt.id, attempt.claimed.name,
                      attempt.claimed.queue)
            self._lost.append((attempt.id, attempt.claimed.name, attempt.claimed.queue))

    def rescue(self) -> bool:
        """Hand back lapsed leases; answer whether any row went back to ``ready``."""
        self._last_rescue = time.monotonic()
        handles = registered_jobs()
        no_dead_letter = [h.name for h in handles if not h.retry.dead_letter]
        try:
            rescued = self.store.job_rescue(now=clock.sql_now(), names=[h.name for h in handles],
                                            no_dead_letter=no_dead_letter)
        except self._db_errors as exc:
            self._on_db_error("jobs.rescue.failed", exc)
            return False
        for job in rescued:
            # A lapse on the final attempt is settled for good (dead, or failed): the seeds' name.
            event = "jobs.lease.rescued" if job.state == "ready" else "jobs.claim.exhausted"
            log.warning("%s job_id=%s name=%s queue=%s now=%s", event, job.id, job.name, job.queue, job.state)
            handle = get_job_handle(job.name)
            if handle is not None and handle.on_settled is not None and job.state in ("dead", "failed"):
                self.settler.after(functools.partial(on_settled.deliver_rescued, handle, job.id, self.alias))
        return any(job.state == "ready" for job in rescued)
