"""Internal: the scheduler's tables: one state row per task, one lease row per scheduler fleet.

``SchedulerState.watermark`` is the newest occurrence the task is done with (fired, or passed
over by its catch-up policy); it only moves forward, by a compare-and-set in the transaction
that writes the occurrence's jobs, so an occurrence fires once however many schedulers run.
``SchedulerLeader`` is a lease with an expiry, never a session lock (which PgBouncer and
connection pools hand back silently); ``version`` is bumped by ``pause_task``/``resume_task``
so the leader, which holds watermarks in memory, reloads them.
"""

from __future__ import annotations

from django.db import models


class SchedulerState(models.Model):
    name = models.CharField(max_length=200, primary_key=True)
    watermark = models.DateTimeField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    last_occurrence = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    fires = models.BigIntegerField(default=0)
    armed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_schedulerstate"

    def __str__(self) -> str:
        return self.name


class SchedulerLeader(models.Model):
    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=200)
    acquired_at = models.DateTimeField()
    renewed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    version = models.BigIntegerField(default=0)

    class Meta:
        db_table = "ultimate_jobs_schedulerleader"

    def __str__(self) -> str:
        return f"{self.name} ({self.holder})"
