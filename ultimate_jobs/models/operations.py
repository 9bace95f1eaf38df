"""Internal: the tables the operator surfaces read: live workers and outcome counters.

``WorkerHeartbeat`` is one row per worker process, written by ``ultimate_jobs.runtime.presence`` once per
heartbeat interval; a row whose ``expires_at`` passed belongs to a worker that died (it is not
shown by ``ops.workers()`` and is deleted later by any live worker).

``JobCounter`` counts how attempts ended, per job name, queue and outcome, in time buckets of
``width`` seconds: 60 (kept 24 h), 300 (kept 7 d), 3600 (kept 30 d), and one all-time row per key
(``width = 0``, bucket at the epoch) that the metrics' monotonic ``jobs_total`` reads. The worker's
settling statement adds to the minute bucket and the all-time row (``db/postgres/jobs.py``
``JOB_SETTLE_MANY``); minute buckets past 24 h are folded into the 5-minute and hourly tiers
(``COUNTER_FOLD``), so each count lives in exactly one bucket of a tier-or-minute pair and a reader
sums both. ``shard`` spreads one hot key over several rows so concurrent workers do not queue on
one row lock; readers sum shards.
"""

from __future__ import annotations

from django.db import models

COUNTER_TIERS = ((60, 86400), (300, 7 * 86400), (3600, 30 * 86400))  # (bucket width, kept for), seconds
ALL_TIME = 0


class WorkerHeartbeat(models.Model):
    id = models.CharField(max_length=200, primary_key=True)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    slots = models.IntegerField(default=0)
    in_flight = models.JSONField(default=list)
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ultimate_jobs_workerheartbeat"
        indexes = [models.Index(fields=["expires_at"], name="ultimate_jobs_worker_expiry")]

    def __str__(self) -> str:
        return self.id


class JobCounter(models.Model):
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=64)
    outcome = models.CharField(max_length=32)
    width = models.IntegerField()
    bucket = models.DateTimeField()
    shard = models.SmallIntegerField(default=0)
    count = models.BigIntegerField(default=0)

    class Meta:
        db_table = "ultimate_jobs_jobcounter"
        constraints = [
            # The settle's ON CONFLICT target: one row per key, tier, bucket and shard.
            models.UniqueConstraint(fields=["name", "queue", "outcome", "width", "bucket", "shard"],
                                    name="ultimate_jobs_counter_key"),
        ]
        indexes = [models.Index(fields=["width", "bucket"], name="ultimate_jobs_counter_tier")]

    def __str__(self) -> str:
        return f"{self.name} {self.outcome} {self.bucket:%Y-%m-%d %H:%M} +{self.count}"
