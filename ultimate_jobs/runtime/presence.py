"""Internal: a worker's presence row (``WorkerHeartbeat``) and what it reports to the operator.

The worker calls ``Presence.beat(in_flight)`` once per heartbeat interval: the first call
registers the row, later ones refresh it (last heartbeat, lease expiry one visibility timeout
ahead, the ids in flight); ``leave()`` deletes it when the worker stops. A killed worker's row
is not deleted by anyone in time: it expires, and ``ops.workers()`` lists it as presumed dead
until the hourly housekeeping deletes it.
Once an hour a beat also deletes rows expired for over an hour and counter buckets past their
tier's retention. ``lease_lost(runs)`` counts runs whose lease this worker lost (not those an
operator cancelled) as the ``lease-lost`` outcome, the source of ``job_leases_lost_total``.

Every write here is best effort: a failure is logged and the worker's loop carries on.

Logged events: ``jobs.worker.presence-failed``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import DatabaseError

from ultimate_jobs import clock
from ultimate_jobs.db import store_for
from ultimate_jobs.errors import db_error_note
from ultimate_jobs.models import Job, WorkerHeartbeat
from ultimate_jobs.runtime.housekeeping import prune_counters

log = logging.getLogger("ultimate_jobs")

HOUSEKEEPING_EVERY = 3600.0  # seconds between deletions of expired rows and counter buckets
EXPIRED_KEPT = timedelta(hours=1)


class Presence:
    """One worker's ``WorkerHeartbeat`` row."""

    def __init__(self, *, worker_id: str, alias: str, queues: Sequence[str], slots: int, visibility: float) -> None:
        self.worker_id = worker_id
        self.alias = alias
        self.queues = list(queues)
        self.slots = slots
        self.visibility = visibility
        self.started_at = clock.now()
        self._housekept = float("-inf")

    def _rows(self) -> Any:
        return WorkerHeartbeat.objects.using(self.alias)

    def beat(self, in_flight: Sequence[UUID]) -> bool:
        """Register or refresh this worker's row; answer whether the write landed."""
        now = clock.now()
        try:
            self._rows().update_or_create(id=self.worker_id, defaults={
                "host": socket.gethostname()[:255], "pid": os.getpid(), "queues": self.queues, "slots": self.slots,
                "in_flight": [str(i) for i in in_flight], "started_at": self.started_at, "last_heartbeat_at": now,
                "expires_at": now + timedelta(seconds=self.visibility)})
            if time.monotonic() - self._housekept >= HOUSEKEEPING_EVERY:
                self._housekept = time.monotonic()
                self._rows().filter(expires_at__lt=now - EXPIRED_KEPT).delete()
                prune_counters(now, database=self.alias)  # each claim loop's own database's counters
        except DatabaseError as exc:
            log.warning("jobs.worker.presence-failed worker=%s error=%r%s", self.worker_id, exc, db_error_note(exc))
            return False
        return True

    def leave(self) -> None:
        """Delete this worker's row (a clean stop); a failure leaves it to expire."""
        try:
            self._rows().filter(id=self.worker_id).delete()
        except DatabaseError as exc:
            log.warning("jobs.worker.presence-failed worker=%s error=%r%s", self.worker_id, exc, db_error_note(exc))

    def lease_lost(self, lost: Sequence[tuple[UUID, str, str]]) -> bool:
        """Count ``(job id, name, queue)`` runs whose lease this worker lost; a run whose row an
        operator cancelled is a cancel, already counted by ``ops.cancel_job``, not a lost lease.
        Answer whether the count landed (the caller keeps them for the next heartbeat if not)."""
        if not lost:
            return True
        try:
            cancelled = set(Job.objects.using(self.alias).filter(id__in=[i for i, _, _ in lost], state="cancelled")
                            .values_list("id", flat=True))
            events = [(name, queue, "lease-lost") for job_id, name, queue in lost if job_id not in cancelled]
            store_for(self.alias).counter_add(events=events, now=clock.sql_now())
        except DatabaseError as exc:
            log.warning("jobs.worker.presence-failed worker=%s error=%r%s", self.worker_id, exc, db_error_note(exc))
            return False
        return True
