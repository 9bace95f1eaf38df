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

Writes on jobs live in ``actions``, queues and workers in ``queues``, counters in
``counters``, the health checks in ``doctor``; this module re-exports them all, so
``ultimate_jobs.ops`` is the one import.
``get_job`` also answers for an id an enqueue inside a transaction returned before the relay
published it (``state`` is ``"staged"``), and for a staged row that deduplicated into a live job
it answers that job (``staged_id`` names the id asked for).

Raises ``X_JOB_NOT_FOUND`` for an unknown id, ``X_ID_INVALID`` for a malformed one,
``X_JOB_INPUT_INVALID`` for a bad filter or limit, and the refusals named on each write
(``X_JOB_NOT_REQUEUEABLE``, ``X_JOB_DUPLICATE``, ``X_JOB_NOT_CANCELLABLE``,
``X_JOB_NOT_PROMOTABLE``, ``X_JOB_NOT_REMOVABLE``).

Logged events: see ``actions`` (``jobs.ops.*``) and ``queues`` (``jobs.queue.*``).

Durable runs add ``resolve_step(id, name, ran=True|False, output=None)`` (end of the module):
a step whose outcome is unknown is resolved by an operator, then the job is retried.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from .actions import (
    MAX_BULK,
    cancel_job,
    promote_job,
    promote_many,
    remove_job,
    remove_many,
    requeue_many,
    retry_job,
)
from .backfill_status import enqueue_backfill, gate_backfill, pending_backfills
from .conf import get_settings
from .counters import counter_totals, counters
from .doctor import doctor
from .errors import (
    X_JOB_INPUT_INVALID,
    X_JOB_NOT_FOUND,
    X_STEP_NOT_FOUND,
    X_STEP_NOT_RESOLVABLE,
    X_STEP_OUTPUT_UNSERIALIZABLE,
    JobsError,
)
from .ids import parse_uuid
from .queues import (
    backfill_runs,
    pause_queue,
    paused_queues,
    queue_stats,
    resume_queue,
    scheduled_tasks,
    scheduler_installed,
    workers,
)
from .redact import redact, redact_text
from .rows import LIST_FIELDS as _LIST_FIELDS
from .rows import ROW_FIELDS as _ROW_FIELDS
from .rows import alias as _alias
from .rows import filter_jobs, id_prefix_range
from .rows import iso as _iso
from .rows import jobs as _jobs
from .rows import shape as _shape

__all__ = [
    "MAX_BULK", "MAX_PAGE", "backfill_runs", "cancel_job", "counter_totals", "counters", "doctor", "enqueue_backfill",
    "gate_backfill", "get_job", "list_jobs", "pause_queue", "paused_queues", "pending_backfills", "promote_job",
    "promote_many", "queue_stats", "remove_job", "remove_many", "requeue_many", "resolve_step", "resume_queue",
    "retry_job", "scheduled_tasks", "scheduler_installed", "workers",
]

MAX_PAGE = 200
_STAGED_FIELDS = (
    "id", "run_id", "name", "queue", "priority", "payload", "idempotency_key", "tenant_id", "enqueued_by",
    "max_attempts", "run_at", "concurrency_key", "staged_at", "published_at", "job_id",
)


def get_job(job_id: str | UUID) -> dict[str, Any]:
    """One job with its step trace; raise ``X_JOB_NOT_FOUND`` when no such job exists.

    An id staged in the outbox and not yet published answers ``state="staged"``; one published
    into another (live) job answers that job, with ``staged_id`` set to ``job_id``.
    """
    from .models import JobStep

    key = parse_uuid(job_id, subject="job id")
    row = _jobs().filter(id=key).values(*_ROW_FIELDS).first()
    staged_id = None
    if row is None:
        entry = _outbox().filter(id=key).values(*_STAGED_FIELDS).first()
        if entry is not None and entry["published_at"] is None:
            return _staged(entry)
        if entry is not None and entry["job_id"] is not None:
            row = _jobs().filter(id=entry["job_id"]).values(*_ROW_FIELDS).first()
            staged_id = str(key)
        if row is None:
            raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")
    job = _shape(row)
    job["staged_id"] = staged_id
    sensitive = job["sensitive"]
    steps = (JobStep.objects.using(_alias()).filter(run_id=row["run_id"])
             .order_by("seq", "id").values("name", "status", "executions", "output", "error", "started_at",
                                           "completed_at"))
    job["steps"] = [{**s, "output": redact(s["output"], sensitive=sensitive), "error": redact_text(s["error"]),
                     "started_at": _iso(s["started_at"]), "completed_at": _iso(s["completed_at"])} for s in steps]
    job["executions"] = row["attempt"]
    job["backfill"] = _ledger_row(row["run_id"])
    return job


def _ledger_row(run_id: UUID) -> dict[str, Any] | None:
    """This run's backfill ledger row, or None (any other job, or a pass that was skipped)."""
    from .models import BackfillRun
    from .queues import ledger_row

    row = BackfillRun.objects.using(_alias()).filter(run_id=run_id).values().first()
    return None if row is None else ledger_row(row)


def _outbox() -> Any:
    from .models import OutboxEntry

    return OutboxEntry.objects.using(_alias())


def _staged(entry: dict[str, Any]) -> dict[str, Any]:
    """A staged, unpublished outbox row in the shape of a job that has not started."""
    row = {key: entry[key] for key in _STAGED_FIELDS if key not in ("payload", "staged_at", "published_at",
                                                                      "job_id")}
    row.update(state="staged", payload=json.loads(entry["payload"]), attempt=0, visible_at=None,
               claimed_by=None, progress=None, result=None, last_error=None, error_code=None,
               stop_reason=None, created_at=entry["staged_at"], started_at=None, finished_at=None,
               updated_at=entry["staged_at"])
    job = _shape(row)
    job.update(staged_id=None, steps=[], executions=0, backfill=None)
    return job


def list_jobs(*, queue: str | None = None, name: str | None = None, state: str | None = None,
              tenant_id: str | None = None, id_prefix: str | None = None, created_from: datetime | None = None,
              created_to: datetime | None = None, limit: int = 50, after: str | None = None,
              before: str | None = None) -> dict[str, Any]:
    """A keyset page of jobs, newest first: ``{"jobs": [...], "next": cursor, "previous": cursor}``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise JobsError(X_JOB_INPUT_INVALID, f"limit={limit!r} must be 1 to {MAX_PAGE}.",
                        f"Page with after=/before= cursors, at most {MAX_PAGE} rows a page.")
    if after is not None and before is not None:
        raise JobsError(X_JOB_INPUT_INVALID, "list_jobs takes after= or before=, not both.")
    query = filter_jobs(_jobs(), state=state, queue=queue, name=name, tenant_id=tenant_id)
    if created_from is not None:
        query = query.filter(created_at__gte=created_from)
    if created_to is not None:
        query = query.filter(created_at__lt=created_to)
    if id_prefix:
        query = _id_prefix(query, id_prefix)
    if after is not None:
        rows = list(query.filter(id__lt=parse_uuid(after, subject="after")).order_by("-id")
                    .values(*_LIST_FIELDS)[: limit + 1])
        more_older, more_newer = len(rows) > limit, True
        rows = rows[:limit]
    elif before is not None:
        rows = list(query.filter(id__gt=parse_uuid(before, subject="before")).order_by("id")
                    .values(*_LIST_FIELDS)[: limit + 1])
        more_newer, more_older = len(rows) > limit, True
        rows = list(reversed(rows[:limit]))
    else:
        rows = list(query.order_by("-id").values(*_LIST_FIELDS)[: limit + 1])
        more_older, more_newer = len(rows) > limit, False
        rows = rows[:limit]
    jobs = [_shape(r) for r in rows]
    return {
        "jobs": jobs,
        "next": jobs[-1]["id"] if jobs and more_older else None,
        "previous": jobs[0]["id"] if jobs and more_newer else None,
    }


def _id_prefix(query: Any, prefix: str) -> Any:
    """Jobs whose id starts with ``prefix`` (hex, dashes optional), as a range on the primary key."""
    low, high = id_prefix_range(prefix)
    return query.filter(id__gte=low, id__lte=high)


# Scheduled tasks: pause_task, resume_task, paused_tasks, task_fires, next_task_run.
from .tasks_ops import next_task_run, pause_task, paused_tasks, resume_task, task_fires  # noqa: E402,F401

# -- durable runs: resolving a step whose outcome is unknown ----------------------------------------


def resolve_step(job_id: str | UUID, name: str, *, ran: bool, output: Any = None) -> dict[str, Any]:
    """Settle a step whose outcome is unknown (a ``once=True`` step found started or failed).

    ``ran=True`` records it completed with ``output`` (JSON): a replay returns that output without
    calling the step. ``ran=False`` forgets it: the next attempt runs the step again. Then retry the
    job (``retry_job``). Raise ``X_JOB_NOT_FOUND``, ``X_STEP_NOT_FOUND``, ``X_STEP_NOT_RESOLVABLE``
    (the job is running, or the step completed already) or ``X_STEP_OUTPUT_UNSERIALIZABLE``.
    """
    from . import clock, jsoncodec
    from .models import JobStep

    row = _job_row(job_id)
    if row["state"] == "running":
        raise JobsError(X_STEP_NOT_RESOLVABLE, f"Job {row['id']} is running; a step is resolved on a job that is not.")
    steps = JobStep.objects.using(_alias()).filter(run_id=row["run_id"], name=name)
    status = steps.values_list("status", flat=True).first()
    if status is None:
        raise JobsError(X_STEP_NOT_FOUND, f"Job {row['id']} has no step {name!r}.")
    if status == "completed":
        raise JobsError(X_STEP_NOT_RESOLVABLE, f"Step {name!r} of job {row['id']} completed already.")
    if not ran:
        steps.delete()
    else:
        try:
            stored = jsoncodec.loads(jsoncodec.dumps(output, max_bytes=get_settings().MAX_STEP_OUTPUT_BYTES,
                                                     what=f"step {name!r} output"))
        except jsoncodec.NotJSON as exc:
            raise JobsError(X_STEP_OUTPUT_UNSERIALIZABLE, f"{exc}.") from None
        steps.update(status="completed", output=stored, error=None, completed_at=clock.now())
    return get_job(row["id"])


def _job_row(job_id: str | UUID) -> dict[str, Any]:
    key = parse_uuid(job_id, subject="job id")
    row = _jobs().filter(id=key).values("id", "run_id", "name", "state", "max_attempts").first()
    if row is None:
        raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")
    return row
