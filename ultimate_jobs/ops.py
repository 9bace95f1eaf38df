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
strings. Payloads, results and errors pass through the redactor.

Raises ``X_JOB_NOT_FOUND`` for an unknown id, ``X_ID_INVALID`` for a malformed one,
``X_JOB_INPUT_INVALID`` for a bad filter or limit.

Durable runs add two writes (a minimal set, at the end of the module): ``resolve_step(id, name,
ran=True|False, output=None)`` and ``retry_job(id, from_step=None)``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from uuid import UUID

from .conf import get_settings
from .declaration import get_job_handle
from .errors import (
    X_ID_INVALID,
    X_JOB_DUPLICATE,
    X_JOB_INPUT_INVALID,
    X_JOB_NOT_FOUND,
    X_JOB_NOT_REQUEUEABLE,
    X_STEP_NOT_FOUND,
    X_STEP_NOT_RESOLVABLE,
    X_STEP_OUTPUT_UNSERIALIZABLE,
    JobsError,
)
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
    """One job with its step trace; raise ``X_JOB_NOT_FOUND`` when no such job exists."""
    from .models import JobStep

    key = parse_uuid(job_id, subject="job id")
    row = _jobs().filter(id=key).values(*_ROW_FIELDS).first()
    if row is None:
        raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")
    job = _shape(row)
    sensitive = job["sensitive"]
    steps = (JobStep.objects.using(get_settings().DATABASE).filter(run_id=row["run_id"])
             .order_by("seq", "id").values("name", "status", "executions", "output", "error", "started_at",
                                           "completed_at"))
    job["steps"] = [{**s, "output": redact(s["output"], sensitive=sensitive), "error": redact_text(s["error"]),
                     "started_at": _iso(s["started_at"]), "completed_at": _iso(s["completed_at"])} for s in steps]
    job["executions"] = row["attempt"]
    job["backfill"] = None
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


# -- minimal write operations for durable runs ---------------------------------------------------------
# ``resolve_step`` and ``retry_job`` as the step guarantees need them (X_STEP_OUTCOME_UNKNOWN is
# resolved by an operator, then retried). Kept small and self-contained so the full operator API
# (cancel, promote, remove, the bulk forms) can replace or absorb them.


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
    steps = JobStep.objects.using(get_settings().DATABASE).filter(run_id=row["run_id"], name=name)
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


def retry_job(job_id: str | UUID, *, from_step: str | None = None) -> dict[str, Any]:
    """Run a finished job again under its run id: completed steps replay, a dead compensating run
    continues its unwind. ``from_step`` forgets that step and every later one first.

    Raise ``X_JOB_NOT_FOUND``, ``X_JOB_NOT_REQUEUEABLE`` (the job is live), ``X_STEP_NOT_FOUND``
    (no such step) or ``X_JOB_DUPLICATE`` (a live job holds its key).
    """
    from django.db import IntegrityError, transaction

    from . import clock
    from .models import JobStep
    from .models.jobs import LIVE_STATES

    row = _job_row(job_id)
    if row["state"] in LIVE_STATES:
        raise JobsError(X_JOB_NOT_REQUEUEABLE, f"Job {row['id']} is {row['state']}; only a finished job is retried.")
    alias = get_settings().DATABASE
    handle = get_job_handle(row["name"])
    now = clock.now()
    with transaction.atomic(using=alias):
        if from_step is not None:
            steps = JobStep.objects.using(alias).filter(run_id=row["run_id"])
            seq = steps.filter(name=from_step).values_list("seq", flat=True).first()
            if seq is None:
                raise JobsError(X_STEP_NOT_FOUND, f"Job {row['id']} has no step {from_step!r}.")
            steps.filter(seq__gte=seq).delete()
        try:
            with transaction.atomic(using=alias):
                _jobs().filter(id=row["id"], state=row["state"]).update(
                    state="ready", attempt=0, max_attempts=handle.max_attempts if handle else row["max_attempts"],
                    run_at=now, visible_at=None, claimed_by=None, claim=None, stop_reason=None, finished_at=None,
                    updated_at=now)
        except IntegrityError:
            raise JobsError(X_JOB_DUPLICATE, f"A live job holds the key of job {row['id']}.") from None
    return get_job(row["id"])


def _job_row(job_id: str | UUID) -> dict[str, Any]:
    key = parse_uuid(job_id, subject="job id")
    row = _jobs().filter(id=key).values("id", "run_id", "name", "state", "max_attempts").first()
    if row is None:
        raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")
    return row
