"""Internal: the job and step tables.

The dedupe namespace is one partial unique index, ``(name, coalesce(tenant_id, ''),
idempotency_key)`` over the live states; the enqueue's ``ON CONFLICT`` target and its live-row
lookup are spelled from the same columns and the same ``LIVE_STATES`` (``ultimate_jobs/states.py``,
rendered into the SQL by ``db/states.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from ultimate_jobs.ids import uuid7
from ultimate_jobs.states import LIVE_STATES, RUNNABLE_STATES, STATES, TERMINAL_STATES

__all__ = ["LIVE_STATES", "RUNNABLE_STATES", "STATES", "STOP_REASONS", "TERMINAL_STATES", "Job", "JobQuerySet",
           "JobStep", "QueuePause"]

STOP_REASONS = ("terminal", "attempts-exhausted", "lease-lapsed", "cancelled", "key-busy")


class JobQuerySet(models.QuerySet["Job"]):
    def live(self) -> JobQuerySet:
        return self.filter(state__in=LIVE_STATES)

    def finished(self) -> JobQuerySet:
        return self.filter(state__in=TERMINAL_STATES)

    def of_runs(self, run_ids: Iterable[UUID]) -> JobQuerySet:
        """The jobs of these runs, asked for where they are indexed (0013_write_path): a run's first
        job by the primary key (its run id is its own id), a job that joined the run by the
        run-member index, whose predicate the second arm repeats (``db/states.py`` RUN_FIRST/RUN_JOINED)."""
        ids = list(run_ids)
        first = Q(run_id=F("id"))
        return self.filter((Q(id__in=ids) & first) | (Q(run_id__in=ids) & ~first))


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    run_id = models.UUIDField(default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=64, default="default")
    priority = models.IntegerField(default=0)
    state = models.CharField(max_length=16, choices=[(s, s) for s in STATES], default="ready")
    payload = models.JSONField(default=dict)
    idempotency_key = models.TextField()
    tenant_id = models.CharField(max_length=200, null=True, blank=True)
    enqueued_by = models.CharField(max_length=200, null=True, blank=True)
    attempt = models.IntegerField(default=0)
    max_attempts = models.IntegerField(default=3)
    run_at = models.DateTimeField()
    visible_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, null=True, blank=True)
    claim = models.UUIDField(null=True, blank=True)
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)
    progress = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    error_code = models.CharField(max_length=64, null=True, blank=True)
    stop_reason = models.CharField(max_length=32, null=True, blank=True)
    traceparent = models.CharField(max_length=64, null=True, blank=True)
    # The declaration's sensitive=True, stored so a process that never imported it (ops, the admin,
    # the CLI, another worker) still masks the row (SPEC §10). db_default: a metadata-only column
    # on PostgreSQL (0014_job_sensitive), and old rows read false.
    sensitive = models.BooleanField(default=False, db_default=False)
    # One entry per settled attempt (worker, start, end, outcome, redacted error), newest last and
    # bounded: django.tasks' per-attempt ``errors``/``worker_ids`` and the admin's timeline read it.
    # db_default: the stores' raw INSERTs do not name the column.
    attempts = models.JSONField(default=list, db_default=Value([], output_field=models.JSONField()), blank=True)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "ultimate_jobs_job"
        constraints = [
            models.UniqueConstraint(
                F("name"), Coalesce("tenant_id", Value("")), F("idempotency_key"),
                condition=Q(state__in=LIVE_STATES),
                name="ultimate_jobs_job_live_key",
            ),
        ]
        indexes = [
            # The claim's two walks, over live rows only, so finished rows and rows waiting for a later
            # run_at cost it nothing (0010_queue_performance): `ready` rows in claim order, and
            # `delayed`/`suspended` rows by run_at, a range that ends at the first row not yet due.
            models.Index(fields=["queue", "priority", "run_at", "id"], name="ultimate_jobs_job_ready",
                         condition=Q(state="ready")),
            models.Index(fields=["queue", "run_at"], name="ultimate_jobs_job_due",
                         condition=Q(state__in=("delayed", "suspended"))),
            # Lapsed-lease rescue reads running rows by lease expiry.
            models.Index(fields=["visible_at"], name="ultimate_jobs_job_lease", condition=Q(state="running")),
            # A fresh job enters only the primary key, the live key and one of the two claim indexes
            # above (0013_write_path): what reports read comes from indexes a fresh row does not enter.
            # Finished rows by state and finish time: the retention purge's range, and queue_stats'
            # finished buckets (the live buckets count from the claim and lease indexes).
            models.Index(fields=["state", "finished_at", "queue"], name="ultimate_jobs_job_finished",
                         condition=Q(state__in=TERMINAL_STATES)),
            # A run's jobs by run id. A run's first job carries its own id as its run id
            # (EnqueueOptions.row) and is found by the primary key; only a job that joined another
            # run (using(run_id=...)) is indexed here. Readers ask for both (JobQuerySet.of_runs;
            # db/states.py RUN_FIRST and RUN_JOINED in the SQL).
            models.Index(fields=["run_id"], name="ultimate_jobs_job_run_member", condition=~Q(run_id=F("id"))),
        ]
        permissions = [
            ("retry_job", "Can retry jobs"),
            ("cancel_job", "Can cancel jobs"),
            ("promote_job", "Can run jobs now"),
            ("pause_queue", "Can pause and resume queues and scheduled tasks"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.id} ({self.state})"


class JobStep(models.Model):
    """One durable step of a run: a checkpointed ``step.run``, a ``step.sleep`` or an event wait.

    ``started_at`` is when the step first began (for an event wait: when the wait began, the
    lower bound of the events it accepts); ``wake_at`` is a sleep's wake time or a wait's
    timeout; ``event``/``event_match`` describe what a wait is waiting for while it is ``started``.
    """

    run_id = models.UUIDField()
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=[(s, s) for s in ("started", "completed", "failed")])
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    executions = models.IntegerField(default=0)
    seq = models.IntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    event = models.CharField(max_length=200, null=True, blank=True)
    event_match = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "ultimate_jobs_jobstep"
        constraints = [models.UniqueConstraint(fields=["run_id", "name"], name="ultimate_jobs_step_unique")]
        indexes = [
            # A publish finds the waits still open on its event name: only those rows are indexed.
            models.Index(fields=["event"], name="ultimate_jobs_step_waiting",
                         condition=Q(status="started", event__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class QueuePause(models.Model):
    queue = models.CharField(max_length=64, primary_key=True)
    paused_at = models.DateTimeField()
    paused_by = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        db_table = "ultimate_jobs_queuepause"

    def __str__(self) -> str:
        return self.queue
