"""Internal: the admin's writes on jobs — what each button and bulk action calls in ``ops``, the
confirmation page every one of them shows first, and the ``LogEntry`` that records who did it.

A write never happens on a GET: the job page's buttons and the changelist's actions lead to a
confirmation page (what will happen, to which jobs), whose POST acts. Each job acted on gets a
``django.contrib.admin`` ``LogEntry`` (the job's "History", and the admin's "Recent actions")
naming the user, and ``ops`` logs ``jobs.ops.*`` with ``by=<username>``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.http import HttpRequest

from ultimate_jobs import ops
from ultimate_jobs.errors import JobsError
from ultimate_jobs.models import Job

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


def _by(call: Callable[..., Any]) -> bool:
    """Whether an ``ops`` write takes ``by=`` (who acted, for its log line)."""
    try:
        return "by" in inspect.signature(call).parameters
    except (TypeError, ValueError):
        return False


def _call(action: str, job_id: str, who: str, step: str | None = None) -> Any:
    """Run one ``ops`` write for ``action`` on ``job_id``, as ``who``."""
    def as_user(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs, **({"by": who} if _by(call) else {}))

    if action == "retry":
        return as_user(ops.retry_job, job_id)
    if action == "retry-from-failed-step":
        return as_user(ops.retry_job, job_id, from_step=step or failed_step(ops.get_job(job_id)))
    if action == "cancel":
        return as_user(ops.cancel_job, job_id, reason=f"from the admin by {who}")
    if action == "run-now":
        return as_user(ops.promote_job, job_id)
    return as_user(ops.remove_job, job_id)


def record(request: HttpRequest, action: str, jobs: Sequence[tuple[str, str]], step: str | None = None) -> None:
    """One ``LogEntry`` per job acted on: ``jobs`` is ``[(id, name)]``."""
    if not jobs or not getattr(request.user, "pk", None):
        return
    note = f"{DONE[action].capitalize()} from the admin" + (f" (from step {step!r})" if step else "") + "."
    rows = [Job(id=job_id, name=name, state="removed" if action == "delete" else DONE[action]) for job_id, name in jobs]
    LogEntry.objects.log_actions(request.user.pk, rows, DELETION if action == "delete" else CHANGE,
                                 change_message=note)


def act(request: HttpRequest, action: str, jobs: Sequence[tuple[str, str]], step: str | None = None,
        ) -> list[tuple[str, JobsError]]:
    """Run ``action`` on each job (``[(id, name)]``), one ``ops`` call each so every refusal keeps
    its code; record what was done; answer the refusals."""
    who = request.user.get_username()
    done, refused = [], []
    for job_id, name in jobs:
        try:
            _call(action, job_id, who, step)
        except JobsError as err:
            refused.append((job_id, err))
        else:
            done.append((job_id, name))
    record(request, action, done, step)
    return refused


def report(request: HttpRequest, action: str, total: int, refused: Sequence[tuple[str, JobsError]]) -> None:
    done = total - len(refused)
    if done:
        messages.success(request, f"{done} job(s) {DONE[action]}.")
    for job_id, refusal in refused[:20]:
        messages.warning(request, f"{job_id}: {refusal.code}: {refusal.cause} Fix: {refusal.fix}")
    if len(refused) > 20:
        messages.warning(request, f"... and {len(refused) - 20} more refused.")
