"""Internal: reading jobs for the operator — one job with its steps, and keyset pages of jobs.

Re-exported by ``ultimate_jobs.ops``: ``get_job`` (a job, a staged outbox row, or the job a staged
row deduplicated into) and ``list_jobs`` (newest first, ``after``/``before`` cursors).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID

from django.db.models import QuerySet

from ultimate_jobs.errors import X_JOB_INPUT_INVALID, X_JOB_NOT_FOUND, JobsError
from ultimate_jobs.factories.consumer import status as consumer_status
from ultimate_jobs.factories.webhook.declaration import get_webhook
from ultimate_jobs.factories.webhook.ledger import deliveries_of
from ultimate_jobs.ids import parse_uuid
from ultimate_jobs.jsoncodec import iso as _iso
from ultimate_jobs.models import BackfillRun, JobStep, OutboxEntry
from ultimate_jobs.ops import routes
from ultimate_jobs.ops.queues import ledger_row
from ultimate_jobs.ops.rows import LIST_FIELDS as _LIST_FIELDS
from ultimate_jobs.ops.rows import ROW_FIELDS as _ROW_FIELDS
from ultimate_jobs.ops.rows import alias as _alias
from ultimate_jobs.ops.rows import filter_jobs, id_prefix_range
from ultimate_jobs.ops.rows import jobs as _jobs
from ultimate_jobs.ops.rows import shape as _shape
from ultimate_jobs.ops.types import AttemptInfo, BackfillRunInfo, JobDetail, JobPage, JobStepInfo, JobSummary
from ultimate_jobs.redact import redact, redact_text
from ultimate_jobs.registry import get_job_handle

MAX_PAGE = 200
STAGED = "staged"  # list_jobs(state=...): an enqueue staged in the outbox, not a job row yet
_STAGED_FIELDS = (
    "id", "run_id", "name", "queue", "priority", "payload", "idempotency_key", "tenant_id", "enqueued_by",
    "max_attempts", "run_at", "concurrency_key", "staged_at", "published_at", "job_id", "sensitive",
)


@routes.by_job
def get_job(job_id: str | UUID, *, tenant_id: str | None = None) -> JobDetail:
    """One job with its step trace; raise ``X_JOB_NOT_FOUND`` when no such job exists.

    An id staged in the outbox and not yet published answers ``state="staged"``; one published
    into another (live) job answers that job, with ``staged_id`` set to ``job_id``. ``tenant_id``
    guards the read: another tenant's job (or one of no tenant) is ``X_JOB_NOT_FOUND``, the very
    answer an unknown id gets, so a scoped caller learns nothing about ids outside its tenant.
    """
    job = _get_job(job_id)
    if tenant_id is not None and job["tenant_id"] != tenant_id:
        raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {parse_uuid(job_id, subject='job id')}.")
    return job


def _get_job(job_id: str | UUID) -> JobDetail:
    key = parse_uuid(job_id, subject="job id")
    row = _jobs().filter(id=key).values(*_ROW_FIELDS, "attempts").first()
    staged_id = None
    if row is None:
        entry = _outbox().filter(id=key).values(*_STAGED_FIELDS).first()
        if entry is not None and entry["published_at"] is None:
            return _staged(entry)
        if entry is not None and entry["job_id"] is not None:
            row = _jobs().filter(id=entry["job_id"]).values(*_ROW_FIELDS, "attempts").first()
            staged_id = str(key)
        if row is None:
            raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")
    attempts = [a for a in row.pop("attempts") or [] if isinstance(a, dict)]  # old or odd rows: skip, never fail
    job = _shape(row)
    job["staged_id"] = staged_id
    job["attempts"] = [AttemptInfo(attempt=int(a.get("attempt") or 0), worker=a.get("worker"),
                                   started_at=_instant(a.get("started_at")),
                                   finished_at=_instant(a.get("finished_at")),
                                   outcome=str(a.get("outcome")),
                                   error_code=a.get("error_code"), error=redact_text(a.get("error")))
                       for a in attempts]
    sensitive = job["sensitive"]
    steps = (JobStep.objects.using(_alias()).filter(run_id=row["run_id"])
             .order_by("seq", "id").values("name", "status", "executions", "output", "error", "started_at",
                                           "completed_at"))
    job["steps"] = [JobStepInfo(name=s["name"], status=s["status"], executions=s["executions"],
                                output=redact(s["output"], sensitive=sensitive), error=redact_text(s["error"]),
                                started_at=_iso(s["started_at"]), completed_at=_iso(s["completed_at"]))
                    for s in steps]
    job["executions"] = row["attempt"]
    job["backfill"] = _ledger_row(row["run_id"])
    job["webhook"] = _webhook_deliveries(job["name"], key)
    payload = row.get("payload")
    job["consumer"] = consumer_status(job["name"], payload.get("key")) if isinstance(payload, dict) else None
    return cast(JobDetail, job)


def _instant(value: Any) -> Any:
    """An attempt's stored timestamp as every other ``ops`` timestamp reads: ISO 8601 in UTC with a
    ``Z`` (the stores write ``+00:00``). A value that is no aware timestamp (an old or odd row) is
    answered as it is, never refused."""
    if not isinstance(value, str):
        return value
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return value if moment.tzinfo is None else _iso(moment.astimezone(UTC))


def _ledger_row(run_id: UUID) -> BackfillRunInfo | None:
    """This run's backfill ledger row, or None (any other job, or a pass that was skipped)."""
    row = BackfillRun.objects.using(_alias()).filter(run_id=run_id).values().first()
    return None if row is None else ledger_row(row)


def _webhook_deliveries(name: str, job_id: UUID) -> list[dict[str, Any]] | None:
    """A webhook() job's delivery attempts in the ``ModelLedger`` table; None for any other job."""
    handle = get_job_handle(name)
    if handle is None or get_webhook(handle) is None:
        return None
    return deliveries_of(job_id)


def _outbox() -> QuerySet[OutboxEntry]:
    return OutboxEntry.objects.using(_alias())


def _staged(entry: Mapping[str, Any]) -> JobDetail:
    """A staged, unpublished outbox row in the shape of a job that has not started."""
    row = {key: entry[key] for key in _STAGED_FIELDS if key not in ("payload", "staged_at", "published_at",
                                                                      "job_id")}
    row.update(state="staged", payload=json.loads(entry["payload"]), attempt=0, visible_at=None,
               claimed_by=None, progress=None, result=None, last_error=None, error_code=None,
               stop_reason=None, created_at=entry["staged_at"], started_at=None, finished_at=None,
               updated_at=entry["staged_at"])
    job = _shape(row)
    job.update(staged_id=None, steps=[], attempts=[], executions=0, backfill=None, webhook=None, consumer=None)
    return cast(JobDetail, job)


@routes.listing
def list_jobs(*, queue: str | None = None, name: str | None = None, state: str | None = None,
              tenant_id: str | None = None, id_prefix: str | None = None, created_from: datetime | None = None,
              created_to: datetime | None = None, limit: int = 50, after: str | None = None,
              before: str | None = None) -> JobPage:
    """A keyset page of jobs, newest first: ``{"jobs": [...], "next": cursor, "previous": cursor}``.

    ``state="staged"`` pages the enqueues staged in the outbox that the relay has not published
    yet (shaped as ``get_job`` answers them); the other states page the job table.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise JobsError(X_JOB_INPUT_INVALID, f"limit={limit!r} must be 1 to {MAX_PAGE}.",
                        f"Page with after=/before= cursors, at most {MAX_PAGE} rows a page.")
    if after is not None and before is not None:
        raise JobsError(X_JOB_INPUT_INVALID, "list_jobs takes after= or before=, not both.")
    if state == STAGED:
        staged = _outbox().filter(published_at__isnull=True, **{k: v for k, v in (
            ("queue", queue), ("name", name), ("tenant_id", tenant_id)) if v is not None})
        if created_from is not None:
            staged = staged.filter(staged_at__gte=created_from)
        if created_to is not None:
            staged = staged.filter(staged_at__lt=created_to)
        if id_prefix:
            staged = _id_prefix(staged, id_prefix)
        return _page(staged, _STAGED_FIELDS, _staged_summary, limit=limit, after=after, before=before)
    query = filter_jobs(_jobs(), state=state, queue=queue, name=name, tenant_id=tenant_id)
    if created_from is not None:
        query = query.filter(created_at__gte=created_from)
    if created_to is not None:
        query = query.filter(created_at__lt=created_to)
    if id_prefix:
        query = _id_prefix(query, id_prefix)
    return _page(query, _LIST_FIELDS, lambda r: cast(JobSummary, _shape(r)), limit=limit, after=after, before=before)


def _page(query: QuerySet[Any], fields: tuple[str, ...], shape: Callable[[dict[str, Any]], JobSummary], *,
          limit: int, after: str | None, before: str | None) -> JobPage:
    """One keyset page of ``query`` by id, newest first, each row through ``shape``."""
    if after is not None:
        rows = list(query.filter(id__lt=parse_uuid(after, subject="after")).order_by("-id")
                    .values(*fields)[: limit + 1])
        more_older, more_newer = len(rows) > limit, True
        rows = rows[:limit]
    elif before is not None:
        rows = list(query.filter(id__gt=parse_uuid(before, subject="before")).order_by("id")
                    .values(*fields)[: limit + 1])
        more_newer, more_older = len(rows) > limit, True
        rows = list(reversed(rows[:limit]))
    else:
        rows = list(query.order_by("-id").values(*fields)[: limit + 1])
        more_older, more_newer = len(rows) > limit, False
        rows = rows[:limit]
    jobs = [shape(r) for r in rows]
    return JobPage(jobs=jobs, next=jobs[-1]["id"] if jobs and more_older else None,
                   previous=jobs[0]["id"] if jobs and more_newer else None)


def _staged_summary(entry: dict[str, Any]) -> JobSummary:
    """A staged outbox row as a row of ``list_jobs``: ``get_job``'s answer for it, list fields only."""
    job = _staged(entry)
    return cast(JobSummary, {k: v for k, v in job.items() if k in _LIST_FIELDS or k in ("next_retry_at",
                                                                                        "sensitive", "task")})


def _id_prefix(query: QuerySet[Any], prefix: str) -> QuerySet[Any]:
    """Jobs whose id starts with ``prefix`` (hex, dashes optional), as a range on the primary key."""
    low, high = id_prefix_range(prefix)
    return query.filter(id__gte=low, id__lte=high)
