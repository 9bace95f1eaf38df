"""Internal: the backfill ledger: one row per pass, the record of what was swept.

A pass is a job's run (``run_id``): a retry of that run adopts its row (``started_at`` is when
the pass began), ``force=True`` starts a new run and so a new row, and a completed row under a
name is what stops a second pass. The row is a report; where a resumed pass restarts is the
answer of its step checkpoints, never of this table.
"""

from __future__ import annotations

from django.db import models

STATUSES = ("running", "completed", "failed")


class BackfillRun(models.Model):
    run_id = models.UUIDField(primary_key=True)
    name = models.CharField(max_length=200)
    job_id = models.UUIDField()
    status = models.CharField(max_length=16, choices=[(s, s) for s in STATUSES])
    checksum = models.CharField(max_length=64)
    environment = models.CharField(max_length=100, null=True, blank=True)
    tenant_id = models.CharField(max_length=200, null=True, blank=True)
    forced = models.BooleanField(default=False)
    previous_run_id = models.UUIDField(null=True, blank=True)
    rows = models.BigIntegerField(default=0)
    batches = models.IntegerField(default=0)
    last_cursor = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    started_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_backfillrun"
        indexes = [
            # The newest pass of a name, and whether a completed one exists.
            models.Index(fields=["name", "started_at"], name="ultimate_jobs_backfill_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.run_id} ({self.status})"
