"""The operator API: what the admin, the CLI and the metrics read, as plain JSON-ready dicts.

Usage::

    from ultimate_jobs import ops
    page = ops.list_jobs(queue="payments", state="dead", limit=50)
    for row in page["jobs"]:
        print(row["id"], row["last_error"])
    older = ops.list_jobs(queue="payments", state="dead", after=page["next"])
    ops.get_job(page["jobs"][0]["id"])["steps"]

Options (default): ``list_jobs`` filters ``queue``, ``name``, ``state``, ``tenant_id``,
``id_prefix``, ``created_from``, ``created_to``; ``limit`` (50, at most 200); ``after`` /
``before`` keyset cursors (newest first). Timestamps are ISO 8601 strings in UTC; ids are
strings. Payloads, results and errors pass through the redactor. ``get_job`` also answers for
an id an enqueue inside a transaction returned before the relay published it (``state`` is
``"staged"``), and for a staged row that deduplicated into a live job it answers that job
(``staged_id`` names the id asked for).

Raises ``X_JOB_NOT_FOUND`` for an unknown id, ``X_ID_INVALID`` for a malformed one,
``X_JOB_INPUT_INVALID`` for a bad filter or limit.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from uuid import UUID

from .conf import get_settings
from .declaration import get_job_handle
from .errors import X_ID_INVALID, X_JOB_INPUT_INVALID, X_JOB_NOT_FOUND, JobsError
from .ids import parse_uuid
from .models.jobs import STATES
from .redact import redact, redact_text

MAX_PAGE = 200
_ROW_FIELDS = (
    "id", "run_id", "name", "queue", "priority", "state", "payload", "idempotency_key", "tenant_id",
    "enqueued_by", "attempt", "max_attempts", "run_at", "visible_at", "claimed_by", "concurrency_key", "progress",
    "result", "last_error", "error_code", "stop_reason", "created_at", "started_at", "finished_at", "updated_at",
)
_LIST_FIELDS = tuple(f for f in _ROW_FIELDS if f not in ("result",))
_STAGED_FIELDS = (
    "id", "run_id", "name", "queue", "priority", "payload", "idempotency_key", "tenant_id", "enqueued_by",
    "max_attempts", "run_at", "concurrency_key", "staged_at", "published_at", "job_id",
)
_HEX_PREFIX = re.compile(r"^[0-9a-f-]{1,36}$")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _jobs() -> Any:
    from .models import Job

    return Job.objects.using(get_settings().DATABASE)


def _shape(row: dict[str, Any]) -> dict[str, Any]:
    handle = get_job_handle(row["name"])
    sensitive = bool(handle and handle.sensitive)
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, UUID):
            value = str(value)
        elif isinstance(value, datetime):
            value = _iso(value)
        out[key] = value
    out["payload"] = redact(out.get("payload"), sensitive=sensitive)
    if "result" in out:
        out["result"] = redact(out["result"], sensitive=sensitive)
    out["last_error"] = redact_text(out.get("last_error"))
    out["next_retry_at"] = (out["run_at"] if row["state"] in ("ready", "delayed") and row["attempt"] > 0
                            else None)
    out["sensitive"] = sensitive
    return out


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
    steps = (JobStep.objects.using(get_settings().DATABASE).filter(run_id=row["run_id"])
             .order_by("seq", "id").values("name", "status", "executions", "output", "error", "started_at",
                                           "completed_at"))
    job["steps"] = [{**s, "output": redact(s["output"], sensitive=sensitive), "error": redact_text(s["error"]),
                     "started_at": _iso(s["started_at"]), "completed_at": _iso(s["completed_at"])} for s in steps]
    job["executions"] = row["attempt"]
    job["backfill"] = None
    return job


def _outbox() -> Any:
    from .models import OutboxEntry

    return OutboxEntry.objects.using(get_settings().DATABASE)


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
    if state is not None and state not in STATES:
        raise JobsError(X_JOB_INPUT_INVALID, f"state={state!r} is not one of {', '.join(STATES)}.")
    query = _jobs()
    if queue is not None:
        query = query.filter(queue=queue)
    if name is not None:
        query = query.filter(name=name)
    if state is not None:
        query = query.filter(state=state)
    if tenant_id is not None:
        query = query.filter(tenant_id=tenant_id)
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
    text = prefix.strip().lower()
    if not _HEX_PREFIX.match(text):
        raise JobsError(X_ID_INVALID, f"id_prefix={prefix!r} is not the start of a UUID.")
    digits = text.replace("-", "")[:32]
    low = UUID(digits.ljust(32, "0"))
    high = UUID(digits.ljust(32, "f"))
    return query.filter(id__gte=low, id__lte=high)
