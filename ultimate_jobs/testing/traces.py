"""Internal: a job's trace — its row and its steps as stored — as ``run_job``, ``drain`` and
``crash_proof`` answer it. Re-exported by ``ultimate_jobs.testing`` (``Trace``, ``StepTrace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from ultimate_jobs.db import store_for
from ultimate_jobs.models import Job, JobStep


@dataclass(frozen=True, slots=True)
class StepTrace:
    name: str
    status: str
    executions: int
    output: Any
    error: str | None
    started_at: datetime | None
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class Trace:
    """One job as it stands after a run: its row and its steps in execution order."""

    id: UUID
    run_id: UUID
    name: str
    state: str
    attempt: int
    max_attempts: int
    result: Any
    last_error: str | None
    error_code: str | None
    stop_reason: str | None
    progress: dict[str, Any] | None
    run_at: datetime
    steps: dict[str, StepTrace] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"<Trace {self.name} {self.state} attempt={self.attempt} error_code={self.error_code} "
                f"steps={[f'{s.name}:{s.status}x{s.executions}' for s in self.steps.values()]}>")


def trace(job_id: UUID, *, database: str | None = None) -> Trace:
    """The trace of one job as stored now."""
    alias = store_for(database).alias
    row = Job.objects.using(alias).get(id=job_id)
    steps = (JobStep.objects.using(alias).filter(run_id=row.run_id).order_by("seq", "id")
             .values_list("name", "status", "executions", "output", "error", "started_at", "completed_at"))
    return Trace(id=row.id, run_id=row.run_id, name=row.name, state=row.state, attempt=row.attempt,
                 max_attempts=row.max_attempts, result=row.result, last_error=row.last_error,
                 error_code=row.error_code, stop_reason=row.stop_reason, progress=row.progress, run_at=row.run_at,
                 steps={s[0]: StepTrace(*s) for s in steps})
