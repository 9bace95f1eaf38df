"""Internal: fleet concurrency slots, one row per held slot.

``(lease_key, slot)`` is the primary key, so two workers can never hold one slot: uniqueness is
the database's, never a lock plus a lookup. A slot is renewed with its worker's heartbeat and
expires by TTL when the worker dies.
"""

from __future__ import annotations

from django.db import models


class JobLease(models.Model):
    pk = models.CompositePrimaryKey("lease_key", "slot")
    lease_key = models.CharField(max_length=200)
    slot = models.IntegerField()
    holder = models.CharField(max_length=200)
    job_id = models.UUIDField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_joblease"

    def __str__(self) -> str:
        return f"{self.lease_key}#{self.slot} held by {self.holder}"
