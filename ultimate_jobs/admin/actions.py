"""Internal: the admin's writes on jobs — what each button and bulk action calls in ``ops``, the
confirmation page every one of them shows first.

A write never happens on a GET: the job page's buttons and the changelist's actions lead to a
confirmation page (what will happen, to which jobs), whose POST acts. Each write passes
``by=request.user`` to ``ops``, which logs ``jobs.ops.*`` with the username and writes one
``django.contrib.admin`` ``LogEntry`` per job (the admin's "Recent actions").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import messages
from django.http import HttpRequest

from ultimate_jobs import ops
from ultimate_jobs.errors import JobsError

# action -> (permission codename prefix, button label, what the confirmation says will happen)
BUTTONS: dict[str, tuple[str, str, str]] = {
    "retry": ("retry", "Retry", "run again from the start of their run with a fresh attempt budget (completed "
              "durable steps replay from storage)"),
    "retry-from-failed-step": ("retry", "Retry from step", "run again, and the chosen step and every later one "
                               "run again instead of replaying"),
    "cancel": ("cancel", "Cancel", "never run again; a running one stops at its worker's next heartbeat"),
    "run-now": ("promote", "Run now", "become runnable now instead of waiting for their run time"),
    "delete": ("delete", "Delete", "be deleted with their step records; this cannot be undone"),
}
DONE = {"retry": "retried", "retry-from-failed-step": "retried from a step", "cancel": "cancelled",
        "run-now": "made runnable now", "delete": "deleted"}
DESTRUCTIVE = ("cancel", "delete")


def failed_step(job: ops.JobDetail) -> str | None:
    """The first step of the run that failed (or started and never completed), if any."""
    for step in job["steps"]:
        if step["status"] != "completed":
            return str(step["name"])
    return None


def _call(action: str, job_id: str, by: Any, step: str | None = None) -> Any:
    """Run one ``ops`` write for ``action`` on ``job_id`` as the user ``by`` (``ops`` logs the
    name and writes the ``LogEntry``)."""
    if action == "retry":
        return ops.retry_job(job_id, by=by)
    if action == "retry-from-failed-step":
        return ops.retry_job(job_id, from_step=step or failed_step(ops.get_job(job_id)), by=by)
    if action == "cancel":
        return ops.cancel_job(job_id, reason="from the admin", by=by)
    if action == "run-now":
        return ops.promote_job(job_id, by=by)
    return ops.remove_job(job_id, by=by)


def act(request: HttpRequest, action: str, jobs: Sequence[tuple[str, str]], step: str | None = None,
        ) -> list[tuple[str, JobsError]]:
    """Run ``action`` on each job (``[(id, name)]``), one ``ops`` call each so every refusal keeps
    its code; answer the refusals."""
    refused = []
    for job_id, _name in jobs:
        try:
            _call(action, job_id, request.user, step)
        except JobsError as err:
            refused.append((job_id, err))
    return refused


def report(request: HttpRequest, action: str, total: int, refused: Sequence[tuple[str, JobsError]]) -> None:
    done = total - len(refused)
    if done:
        messages.success(request, f"{done} job(s) {DONE[action]}.")
    for job_id, refusal in refused[:20]:
        messages.warning(request, f"{job_id}: {refusal.code}: {refusal.cause} Fix: {refusal.fix}")
    if len(refused) > 20:
        messages.warning(request, f"... and {len(refused) - 20} more refused.")
