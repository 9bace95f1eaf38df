"""Internal: an operator resolving a durable step whose outcome is unknown; re-exported by ``ops``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import (
    X_JOB_NOT_FOUND,
    X_STEP_NOT_FOUND,
    X_STEP_NOT_RESOLVABLE,
    X_STEP_OUTPUT_UNSERIALIZABLE,
    JobsError,
)
from ultimate_jobs.ids import parse_uuid
from ultimate_jobs.models import JobStep
from ultimate_jobs.ops import audit, routes
from ultimate_jobs.ops.jobs import get_job
from ultimate_jobs.ops.rows import alias as _alias
from ultimate_jobs.ops.rows import jobs as _jobs
from ultimate_jobs.ops.types import JobDetail

if TYPE_CHECKING:
    from ultimate_jobs.ops.audit import Actor

log = logging.getLogger("ultimate_jobs")


@routes.by_job
def resolve_step(job_id: str | UUID, name: str, *, ran: bool, output: Any = None, by: Actor = None) -> JobDetail:
    """Settle a step whose outcome is unknown (a ``once=True`` step found started or failed).

    ``ran=True`` records it completed with ``output`` (JSON): a replay returns that output without
    calling the step. ``ran=False`` forgets it: the next attempt runs the step again. Then retry the
    job (``retry_job``). Raise ``X_JOB_NOT_FOUND``, ``X_STEP_NOT_FOUND``, ``X_STEP_NOT_RESOLVABLE``
    (the job is running, or the step completed already) or ``X_STEP_OUTPUT_UNSERIALIZABLE``.
    """
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
    audit.record(by, "Resolved step", [(row["id"], row["name"])], detail=f"{name}: {'ran' if ran else 'not ran'}")
    log.info("jobs.ops.step_resolved job_id=%s step=%s ran=%s by=%s", row["id"], name, ran, audit.who(by))
    return get_job(row["id"])


def _job_row(job_id: str | UUID) -> Mapping[str, Any]:
    key = parse_uuid(job_id, subject="job id")
    row = _jobs().filter(id=key).values("id", "run_id", "name", "state", "max_attempts").first()
    if row is None:
        raise JobsError(X_JOB_NOT_FOUND, f"No job has the id {key}.")
    return row
