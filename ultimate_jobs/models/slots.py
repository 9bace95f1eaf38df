"""Internal: fleet concurrency slots, one row per held slot.

``(concurrency_key, slot)`` is the primary key, so two workers can never hold one slot:
uniqueness is the database's, never a lock plus a lookup. A slot is renewed with its worker's
heartbeat and expires by TTL when the worker dies. The table keeps the name it was created with
(``ultimate_jobs_joblease``), so the rename to ``FleetSlot`` moved no data.
"""

from __future__ import annotations

from django.db import models


class FleetSlot(models.Model):
    pk = models.CompositePrimaryKey("concurrency_key", "slot")
    concurrency_key = models.CharField(max_length=200)
    slot = models.IntegerField()
    holder = models.CharField(max_length=200)
    job_id = models.UUIDField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_joblease"

    def __str__(self) -> str:
        return f"{self.concurrency_key}#{self.slot} held by {self.holder}"
