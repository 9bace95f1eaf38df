"""Internal: the stored event bus ``publish_event`` writes and ``step.wait_for_event`` reads."""

from __future__ import annotations

from django.db import models

from ultimate_jobs.ids import uuid7


class JobEvent(models.Model):
    """One published event. Written in the publisher's transaction, so it exists only if that
    transaction commits; ``published_at`` is read off the database clock (PostgreSQL)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    # Events are tenant-scoped (SPEC §6): a run waits only for events of its own tenant.
    tenant_id = models.CharField(max_length=200, null=True, blank=True)
    published_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_jobevent"
        indexes = [
            # A waiter reads the events of one name published since its wait began.
            models.Index(fields=["name", "published_at"], name="ultimate_jobs_event_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.id}"
