"""The operator API: what the admin, the CLI and the metrics read, as plain JSON-ready dicts.

Usage::

    from ultimate_jobs import ops
    page = ops.list_jobs(queue="payments", state="dead", limit=50)
    for row in page["jobs"]:
        print(row["id"], row["last_error"])
    older = ops.list_jobs(queue="payments", state="dead", after=page["next"])
    job = ops.get_job(page["jobs"][0]["id"])          # row + steps + next retry + backfill
    ops.retry_job(job["id"], from_step="charge")       # drop "charge" and later steps, run again
    ops.requeue_many(state="dead", queue="payments")   # {"affected": n, "remaining": m}
    ops.pause_queue("payments"); ops.queue_stats(); ops.workers(); ops.doctor()

Options (default): ``list_jobs`` filters ``queue``, ``name``, ``state``, ``tenant_id``,
``id_prefix``, ``created_from``, ``created_to``; ``limit`` (50, at most ``MAX_PAGE`` 200);
``after`` / ``before`` keyset cursors (newest first). Bulk calls take ``state``, ``queue``,
``name``, ``tenant_id``, ``ids`` and touch at most ``MAX_BULK`` (1,000) rows a call.
Timestamps are ISO 8601 strings in UTC; ids are strings. Payloads, results and errors pass
through the redactor.

Reads of jobs live in ``jobs``, writes on jobs in ``actions``, queues and workers in ``queues``,
scheduled tasks in ``schedule``, counters in ``counters``, the health checks in ``doctor``, an
orchestrator's probe (databases answer, workers alive) in ``health``, step
resolution in ``steps``, an operator's enqueue in ``enqueues``; this package re-exports them all,
so ``ultimate_jobs.ops`` is the one import.
``get_job`` also answers for an id an enqueue inside a transaction returned before the relay
published it (``state`` is ``"staged"``), and for a staged row that deduplicated into a live job
it answers that job (``staged_id`` names the id asked for).

Raises ``X_JOB_NOT_FOUND`` for an unknown id, ``X_ID_INVALID`` for a malformed one,
``X_JOB_INPUT_INVALID`` for a bad filter or limit, and the refusals named on each write
(``X_JOB_NOT_REQUEUEABLE``, ``X_JOB_DUPLICATE``, ``X_JOB_NOT_CANCELLABLE``,
``X_JOB_NOT_PROMOTABLE``, ``X_JOB_NOT_REMOVABLE``).

Every answer is typed: the ``TypedDict``s of ``ops.types`` (``JobDetail``, ``JobPage``,
``QueueStats``, ``DoctorReport``, ...) are re-exported here for annotations.

Logged events: see ``actions`` (``jobs.ops.*``) and ``queues`` (``jobs.queue.*``).

Durable runs add ``resolve_step(id, name, ran=True|False, output=None)``: a step whose outcome
is unknown is resolved by an operator, then the job is retried.
"""

from __future__ import annotations

from ultimate_jobs.factories.backfill.status import enqueue_backfill, gate_backfill, pending_backfills
from ultimate_jobs.ops.actions import (
    MAX_BULK,
    cancel_job,
    promote_job,
    promote_many,
    remove_job,
    remove_many,
    requeue_many,
    retry_job,
)
from ultimate_jobs.ops.counters import counter_totals, counters
from ultimate_jobs.ops.doctor import doctor
from ultimate_jobs.ops.enqueues import enqueue_job
from ultimate_jobs.ops.health import HealthReport, health
from ultimate_jobs.ops.jobs import MAX_PAGE, get_job, list_jobs
from ultimate_jobs.ops.lookup import matching_job_ids, resolve_job_id, short_form
from ultimate_jobs.ops.overview import Overview, overview
from ultimate_jobs.ops.queues import (
    backfill_runs,
    pause_queue,
    paused_queues,
    queue_stats,
    resume_queue,
    scheduled_tasks,
    workers,
)
from ultimate_jobs.ops.schedule import next_task_run, pause_task, paused_tasks, resume_task, task_fires
from ultimate_jobs.ops.steps import resolve_step
from ultimate_jobs.ops.types import (
    BackfillRunInfo,
    BulkResult,
    CounterBucket,
    Counters,
    CounterTotal,
    DoctorCheck,
    DoctorReport,
    EnqueuedJob,
    JobDetail,
    JobPage,
    JobStepInfo,
    JobSummary,
    PausedQueue,
    QueuePaused,
    QueueResumed,
    QueueStats,
    RemovedJob,
    ScheduledTask,
    TaskFire,
    WorkerInfo,
)

__all__ = [
    "BackfillRunInfo", "BulkResult", "CounterBucket", "CounterTotal", "Counters", "DoctorCheck", "DoctorReport",
    "EnqueuedJob", "HealthReport",
    "JobDetail", "JobPage", "JobStepInfo", "JobSummary", "MAX_BULK", "MAX_PAGE", "Overview", "PausedQueue",
    "QueuePaused", "QueueResumed", "QueueStats", "RemovedJob", "ScheduledTask", "TaskFire", "WorkerInfo",
    "backfill_runs", "cancel_job", "counter_totals", "counters", "doctor", "enqueue_backfill", "enqueue_job",
    "gate_backfill",
    "get_job", "health", "list_jobs", "matching_job_ids", "next_task_run", "overview", "pause_queue", "pause_task",
    "paused_queues", "paused_tasks", "pending_backfills", "promote_job", "promote_many", "queue_stats", "remove_job",
    "remove_many", "requeue_many", "resolve_job_id", "resolve_step", "resume_queue", "resume_task", "retry_job",
    "scheduled_tasks", "short_form", "task_fires", "workers",
]
