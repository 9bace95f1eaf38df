"""Internal: fleet-wide concurrency slots (``@job(concurrency=...)``) for the worker.

A run of a job with a ``concurrency`` takes one ``FleetSlot`` row of its key before the body
starts, renews it with the worker's heartbeat and hands it back when the body returns. Every
worker sees the same rows, so the cap holds across the fleet; a killed worker's slots expire
after one visibility timeout. A busy key either hands the claim back uncounted
(``when_busy="wait"``: state stays ``ready``, a later ``run_at``, no ``last_error``) or settles
``failed`` with ``X_JOB_KEY_BUSY`` without running the body (``when_busy="fail"``).

Logged events: ``jobs.slot.busy``, ``jobs.slot.failed``, ``jobs.worker.slot-lost``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.db import DatabaseError

from ultimate_jobs import clock
from ultimate_jobs.db.store import Settlement, Store
from ultimate_jobs.errors import X_JOB_KEY_BUSY, X_JOB_SLOT_LOST

if TYPE_CHECKING:
    from ultimate_jobs.runtime.holdings import Attempt

log = logging.getLogger("ultimate_jobs")


class FleetSlots:
    """Takes, renews and releases the slots of one worker's runs."""

    def __init__(self, store: Store, *, holder: str, ttl: float, wait_delay: float) -> None:
        self.store = store
        self.holder = holder
        self.ttl = ttl
        self.wait_delay = wait_delay

    def acquire(self, attempt: Attempt) -> Settlement | None:
        """Take a slot for ``attempt``; answer ``None`` to go ahead, or how to settle a busy key."""
        concurrency = attempt.handle.concurrency
        key = attempt.claimed.concurrency_key
        if concurrency is None or key is None:
            return None
        claimed = attempt.claimed
        try:
            slot = self.store.slot_acquire(key=key, limit=concurrency.limit, job_id=claimed.id, holder=self.holder,
                                            ttl=self.ttl, now=clock.sql_now())
        except DatabaseError as exc:
            log.warning("jobs.slot.failed job_id=%s key=%s error=%r", claimed.id, key, exc)
            return Settlement(claimed.id, claimed.claim, "ready", delay=self.wait_delay, uncount=True)
        if slot is not None:
            attempt.slot = (key, slot)
            return None
        log.info("jobs.slot.busy job_id=%s name=%s key=%s when_busy=%s", claimed.id, claimed.name, key,
                 concurrency.when_busy)
        if concurrency.when_busy == "fail":
            return Settlement(claimed.id, claimed.claim, "failed", error_code=X_JOB_KEY_BUSY, stop_reason="key-busy",
                              last_error=f"concurrency key {key!r} is busy ({concurrency.limit} slot(s) held)")
        return Settlement(claimed.id, claimed.claim, "ready", delay=self.wait_delay, uncount=True)

    def release(self, attempt: Attempt) -> None:
        if attempt.slot is None:
            return
        key, slot = attempt.slot
        try:
            self.store.slot_release(key=key, slot=slot, job_id=attempt.claimed.id, holder=self.holder)
        except DatabaseError as exc:  # the slot expires by TTL instead
            log.warning("jobs.slot.release-failed job_id=%s key=%s error=%r", attempt.claimed.id, key, exc)
        attempt.slot = None

    def renew(self, attempts: list[Attempt]) -> None:
        """Renew the slots of ``attempts``; a slot that was lost cancels its attempt (``X_JOB_SLOT_LOST``)."""
        holding = [r for r in attempts if r.slot is not None]
        if not holding:
            return
        renewed = self.store.slot_renew(held=[(r.slot[0], r.slot[1], r.claimed.id) for r in holding
                                               if r.slot is not None],
                                         holder=self.holder, ttl=self.ttl, now=clock.sql_now())
        for attempt in holding:
            if attempt.claimed.id not in renewed and attempt.slot is not None and not attempt.finished.is_set():
                key, slot = attempt.slot
                if attempt.token.set(X_JOB_SLOT_LOST, f"The concurrency slot {key}#{slot} expired and was taken."):
                    log.error("jobs.worker.slot-lost job_id=%s name=%s key=%s", attempt.claimed.id,
                              attempt.claimed.name, key)
