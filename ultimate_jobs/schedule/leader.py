"""Internal: the scheduler's leader lease, a row with an expiry (``SchedulerLeader``).

One upsert both acquires and renews (``Store.leader_attempt_elect``), so the scheduler asks it
every round and again before every task: a cached "I lead" would keep dispatching past a lease
another node already took. The database clock decides expiry; this process's monotonic clock
only decides when to stop trusting a lease it holds (renewed at ``t``, trusted until
``t + ttl - margin``, measured from before the statement was sent). A session advisory lock is
not used: a pooled connection (or PgBouncer) hands it back silently and every node then leads.

Logged events: ``jobs.scheduler.leading``, ``jobs.scheduler.leadership-lost``,
``jobs.scheduler.released``, ``jobs.scheduler.release-failed``.
"""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError

from ultimate_jobs import clock, faults
from ultimate_jobs.db import LeaderLease, Store

log = logging.getLogger("ultimate_jobs")


class Leadership:
    """One process's view of the lease ``name``."""

    def __init__(self, store: Store, *, name: str, holder: str, ttl: float) -> None:
        self.store = store
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.leading = False
        self.lease: LeaderLease | None = None
        self._trusted_until = 0.0
        self._margin = min(1.0, ttl / 10)

    def elect(self) -> LeaderLease:
        """Acquire or renew; answer the election with the database's ``now``."""
        if self.leading:
            faults.fault("leader_before_renew")
        sent = time.monotonic()
        lease = self.store.leader_attempt_elect(name=self.name, holder=self.holder, ttl=self.ttl,
                                                now=clock.sql_now())
        if lease.leading and time.monotonic() - sent >= self.ttl - self._margin:
            lease = lease._replace(leading=False)  # the answer took the whole lease to arrive: do not act
        if lease.leading and not self.leading:
            log.info("jobs.scheduler.leading holder=%s lease=%s expires_at=%s", self.holder, self.name,
                     lease.expires_at.isoformat() if lease.expires_at else None)
        elif self.leading and not lease.leading:
            log.warning("jobs.scheduler.leadership-lost holder=%s lease=%s now_held_by=%s", self.holder,
                        self.name, lease.holder)
        self.leading = lease.leading
        self._trusted_until = sent + self.ttl - self._margin if lease.leading else 0.0
        self.lease = lease
        return lease

    @property
    def trusted(self) -> bool:
        """Whether the lease this process holds is still inside its own, monotonic, margin."""
        return self.leading and time.monotonic() < self._trusted_until

    def still_leading(self) -> LeaderLease | None:
        """Ask again (a renewal); answer the lease while this process leads, else None."""
        lease = self.elect()
        return lease if lease.leading and self.trusted else None

    def forget(self) -> None:
        """Stop believing in the lease without touching the row (after a failed round)."""
        self.leading = False
        self._trusted_until = 0.0

    def resign(self) -> None:
        """Hand the lease back, if held: a standby takes over now instead of at expiry."""
        if not self.leading:
            return
        self.leading = False
        self._trusted_until = 0.0
        try:
            released = self.store.leader_resign(name=self.name, holder=self.holder, now=clock.sql_now())
        except DatabaseError as exc:  # the lease then ends at its expiry, which is safe
            log.warning("jobs.scheduler.release-failed holder=%s error=%r", self.holder, exc)
            return
        if released:
            log.info("jobs.scheduler.released holder=%s lease=%s", self.holder, self.name)
