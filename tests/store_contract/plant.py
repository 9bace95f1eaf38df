"""Rows the contract tests plant, and the fixed clock they pass as ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from ultimate_jobs.db.store import ClaimedJob, JobRow, Store
from ultimate_jobs.ids import uuid7
from ultimate_jobs.models import Job

NOW = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)
NAME = "contract.job"


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def job_row(*, key: str = "k1", name: str = NAME, queue: str = "q", tenant: str | None = None, priority: int = 0,
            delay: float = 0.0, max_attempts: int = 3) -> JobRow:
    return JobRow(id=uuid7(), run_id=uuid7(), name=name, queue=queue, priority=priority, payload='{"n": 1}',
                  idempotency_key=key, tenant_id=tenant, enqueued_by=None, max_attempts=max_attempts, delay=delay,
                  run_at=None, concurrency_key=None, traceparent=None)


def insert(store: Store, **row: Any) -> UUID:
    """One job inserted at ``NOW``; its id."""
    return store.job_insert_many(rows=[job_row(**row)], now=NOW)[0].id


def claim(store: Store, *, queue: str = "q", limit: int = 10, worker: str = "w1", visibility: float = 30,
          now: datetime = NOW, names: tuple[str, ...] = (NAME,)) -> list[ClaimedJob]:
    return store.job_claim(queue=queue, names=names, limit=limit, worker_id=worker, visibility=visibility, now=now)


def claimed(store: Store, **row: Any) -> ClaimedJob:
    """One job inserted and claimed by ``w1`` at ``NOW``."""
    insert(store, **row)
    (job,) = claim(store, queue=row.get("queue", "q"))
    return job


def job(store: Store, job_id: UUID) -> Job:
    return Job.objects.using(store.alias).get(id=job_id)
