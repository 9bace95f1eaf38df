"""Internal: the outbox table: enqueues staged inside the caller's transaction, waiting for the relay.

A row is the whole enqueue request, validated before it was written, under the ids the job will
carry. ``claimed_at``/``claimed_by`` are a lease (see ``ultimate_jobs.outbox.relay``); ``published_at``
and ``job_id`` record when it was published and which job it became (its own id, or the live job
it deduplicated into). ``txid`` groups the rows of one staging transaction on PostgreSQL: rows of
one group publish in ``(staged_at, id)`` order and never overtake each other.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from ultimate_jobs.ids import uuid7


class OutboxEntry(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    txid = models.BigIntegerField(null=True, blank=True)
    staged_at = models.DateTimeField()
    run_id = models.UUIDField()
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=64)
    priority = models.IntegerField(default=0)
    # The encoded input as JSON text: validated at enqueue, parsed once, when the job is inserted.
    payload = models.TextField()
    idempotency_key = models.TextField()
    tenant_id = models.CharField(max_length=200, null=True, blank=True)
    enqueued_by = models.CharField(max_length=200, null=True, blank=True)
    max_attempts = models.IntegerField()
    run_at = models.DateTimeField()
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)
    traceparent = models.CharField(max_length=64, null=True, blank=True)
    sensitive = models.BooleanField(default=False, db_default=False)  # carried to the job row (Job.sensitive)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    job_id = models.UUIDField(null=True, blank=True)

    class Meta:
        db_table = "ultimate_jobs_outboxentry"
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox entries"
        indexes = [
            # Claim order over the unpublished rows: the relay's claim walks this index.
            models.Index(fields=["staged_at", "id"], name="ultimate_jobs_outbox_claim",
                         condition=Q(published_at__isnull=True)),
            # One staging transaction's unpublished rows, in order: where a claim's batch must stop.
            models.Index(fields=["txid", "staged_at", "id"], name="ultimate_jobs_outbox_txid",
                         condition=Q(published_at__isnull=True)),
            # The rows a relay holds: few, so "is an earlier row of this group held?" stays cheap.
            models.Index(fields=["txid", "staged_at", "id"], name="ultimate_jobs_outbox_held",
                         condition=Q(published_at__isnull=True, claimed_at__isnull=False)),
            # Retention deletes published rows by age.
            models.Index(fields=["published_at"], name="ultimate_jobs_outbox_published",
                         condition=Q(published_at__isnull=False)),
        ]

    def __str__(self) -> str:
        state = "published" if self.published_at else "claimed" if self.claimed_at else "staged"
        return f"{self.name} {self.id} ({state})"
