"""What the operator API answers, as ``TypedDict``s: plain, JSON-ready dicts a type checker can read.

Re-exported by ``ultimate_jobs.ops``. Usage::

    from ultimate_jobs import ops
    from ultimate_jobs.ops import JobDetail

    def last_error(job_id: str) -> str | None:
        job: JobDetail = ops.get_job(job_id)
        return job["last_error"]

Ids are strings, timestamps ISO 8601 strings in UTC (``"2026-03-28T02:00:00Z"``), and payloads,
results, step outputs and errors have passed through the redactor.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class JobSummary(TypedDict):
    """One job in a page (``list_jobs``): its row without the result."""

    id: str
    run_id: str
    name: str
    queue: str
    priority: int
    state: str
    payload: Any
    idempotency_key: str
    tenant_id: str | None
    enqueued_by: str | None
    attempt: int
    max_attempts: int
    run_at: str
    visible_at: str | None
    claimed_by: str | None
    concurrency_key: str | None
    progress: Any
    last_error: str | None
    error_code: str | None
    stop_reason: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    updated_at: str
    next_retry_at: str | None
    sensitive: bool
    task: str | None  # a Django task's module path (a django_tasks row), else None


class JobStepInfo(TypedDict):
    """One durable step of a job's run, in execution order."""

    name: str
    status: str
    executions: int
    output: Any
    error: str | None
    started_at: str | None
    completed_at: str | None


class BackfillRunInfo(TypedDict):
    """One pass of a backfill in its ledger (``BackfillRun``)."""

    run_id: str
    name: str
    job_id: str
    status: str
    checksum: str
    environment: str | None
    tenant_id: str | None
    forced: bool
    previous_run_id: str | None
    rows: int
    batches: int
    last_cursor: Any
    error_code: str | None
    last_error: str | None
    started_at: str
    completed_at: str | None
    updated_at: str


class AttemptInfo(TypedDict):
    """One settled attempt in a job's history (``Job.attempts``, the newest 50): who ran it, when,
    how it ended (``done``, ``retried``, ``dead``, ``failed``), and its redacted error."""

    attempt: int
    worker: str | None
    started_at: str | None
    finished_at: str | None
    outcome: str
    error_code: str | None
    error: str | None


class JobDetail(JobSummary):
    """One job as ``get_job`` and the single-job actions answer it: the row, its result, its steps,
    its attempt history (oldest first), its backfill ledger row when it is a backfill pass, and its
    delivery attempts or consumer state when it is a webhook() or consumer() job.
    ``staged_id`` names the outbox id asked for when that staged row deduplicated into this (live) job."""

    result: Any
    staged_id: str | None
    steps: list[JobStepInfo]
    attempts: list[AttemptInfo]
    executions: int
    backfill: BackfillRunInfo | None
    webhook: list[dict[str, Any]] | None  # a webhook() job's delivery attempts (the ModelLedger rows)
    consumer: dict[str, Any] | None  # a consumer() job's key, last_batch_at and lag


class JobPage(TypedDict):
    """A keyset page of jobs, newest first; ``next``/``previous`` are the cursors (None at an end)."""

    jobs: list[JobSummary]
    next: str | None
    previous: str | None


class BulkResult(TypedDict):
    """A bulk write: rows it changed, and rows still matching (call again until 0)."""

    affected: int
    remaining: int


class RemovedJob(TypedDict):
    id: str
    removed: bool


class PausedQueue(TypedDict):
    queue: str
    paused_at: str
    paused_by: str | None


class QueuePaused(PausedQueue):
    paused: bool


class QueueResumed(TypedDict):
    queue: str
    paused: bool
    was_paused: bool


class QueueStats(TypedDict):
    """One queue: a count per bucket (every row in exactly one), and the oldest ready job."""

    queue: str
    staged: int
    ready: int
    delayed: int
    running: int
    suspended: int
    done: int
    failed: int
    dead: int
    cancelled: int
    total: int
    oldest_ready_at: str | None
    oldest_ready_age: float | None
    paused: bool


class WorkerInfo(TypedDict):
    """A worker, from its heartbeat row: ``alive``, or ``presumed-dead`` once its last heartbeat is
    older than its visibility timeout (killed, or cut off from the database)."""

    id: str
    host: str
    pid: int
    queues: list[str]
    slots: int
    in_flight: Any
    in_flight_count: int
    started_at: str
    last_heartbeat_at: str
    last_heartbeat_age: float
    expires_at: str
    status: Literal["alive", "presumed-dead"]


class TaskFire(TypedDict):
    """A scheduled task: its declaration, and where the scheduler stands on it."""

    name: str
    cron: str
    tz: str
    job: str
    catch_up: str
    max_catch_up: int
    paused: bool
    armed: bool
    watermark: str | None
    last_occurrence: str | None
    last_fired_at: str | None
    fires: int
    next_run_at: str | None
    missed_since: str | None


class ScheduledTask(TypedDict):
    """One row of the admin's tasks page and of ``jobs tasks``."""

    task: str
    next_run: str | None
    last_fire: str | None
    last_occurrence: str | None
    paused: bool


class CounterBucket(TypedDict):
    at: str | None
    outcome: str
    count: int


class Counters(TypedDict):
    """Outcome counts in time buckets of ``width`` seconds since ``since``, and their totals."""

    name: str | None
    queue: str | None
    since: str | None
    width: int
    buckets: list[CounterBucket]
    totals: dict[str, int]


class CounterTotal(TypedDict):
    queue: str
    outcome: str
    count: int


class DoctorCheck(TypedDict):
    """One invariant check: ``status`` (ok, failed, skipped, not-applicable), ``ok`` (false when it
    failed or was skipped), why, and at most ``MAX_IDS`` offending ids."""

    name: str
    status: Literal["ok", "failed", "skipped", "not-applicable"]
    ok: bool
    skipped: bool
    detail: str
    ids: list[str]


class DoctorReport(TypedDict):
    ok: bool
    checked_at: str | None
    checks: list[DoctorCheck]


class EnqueuedJob(TypedDict):
    """``enqueue_job``'s answer: the job's ids, where it went, and how the enqueue ended
    (``deduped`` None when ``staged``: the relay decides it)."""

    id: str
    run_id: str
    name: str
    queue: str
    deduped: bool | None
    staged: bool
