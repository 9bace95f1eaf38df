"""Internal: a job row read back as the framework's ``TaskResult``.

Status: READY for ready, delayed, staged and suspended rows (waiting to run); RUNNING while
claimed; SUCCESSFUL for done; FAILED for failed, dead and cancelled. ``errors`` and
``worker_ids`` come from the job's per-attempt history (``Job.attempts``): one error per failed
attempt (its class path from the traceback's last line, ``ExcClass: message``), one worker id per
attempt. ``started_at`` is the first attempt's start, ``last_attempted_at`` the latest's.
This is the owner's read path, not an operator surface: arguments and return value are exact.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from ultimate_jobs.context import JobContext
from ultimate_jobs.contrib.tasks.declared import TASK_JOB, load_task
from ultimate_jobs.contrib.tasks.framework import (
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from ultimate_jobs.db.routing import alias_for_queue, aliases
from ultimate_jobs.errors import X_LEASE_LAPSED
from ultimate_jobs.models import Job, OutboxEntry

STATUS = {
    "ready": TaskResultStatus.READY, "delayed": TaskResultStatus.READY, "staged": TaskResultStatus.READY,
    "suspended": TaskResultStatus.READY, "running": TaskResultStatus.RUNNING, "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED, "dead": TaskResultStatus.FAILED, "cancelled": TaskResultStatus.FAILED,
}
# What a lapsed lease (the worker died) is recorded as: an importable exception class.
LAPSED_CLASS = "ultimate_jobs.errors.JobsError"
_FIELDS = ("id", "name", "queue", "state", "payload", "result", "attempt", "claimed_by", "attempts", "run_at",
           "created_at", "started_at", "finished_at")


def read(result_id: str, *, database: str) -> TaskResult[..., Any]:
    """The ``TaskResult`` of ``result_id``; ``TaskResultDoesNotExist`` for an id that is no Django task's."""
    try:
        key = UUID(str(result_id))
    except ValueError:
        raise TaskResultDoesNotExist(result_id) from None
    row = None
    # A routed queue's jobs live on its alias (QUEUE_DATABASES): the backend's database first, then those.
    for alias in dict.fromkeys([database, *aliases()]):
        row = Job.objects.using(alias).filter(id=key, name=TASK_JOB).values(*_FIELDS).first()
        if row is not None:
            break
    if row is None:  # an enqueue inside a transaction stages on the caller's database
        staged = (OutboxEntry.objects.using(database).filter(id=key, name=TASK_JOB, published_at__isnull=True)
                  .values("id", "queue", "payload", "run_at", "staged_at").first())
        if staged is None:
            raise TaskResultDoesNotExist(result_id)
        row = {**staged, "state": "staged", "result": None, "attempt": 0, "claimed_by": None, "attempts": [],
               "created_at": staged["staged_at"], "started_at": None, "finished_at": None}
    return from_row(row)


def from_row(row: dict[str, Any]) -> TaskResult[..., Any]:
    payload = row["payload"]
    if isinstance(payload, str):
        payload = json.loads(payload)
    history = list(row["attempts"] or [])
    status = STATUS[row["state"]]
    workers = [str(entry.get("worker") or "") for entry in history]
    if status == TaskResultStatus.RUNNING and row["attempt"] > len(history) and row["claimed_by"]:
        workers.append(row["claimed_by"])
    starts = [_when(entry.get("started_at")) for entry in history]
    result: TaskResult[..., Any] = TaskResult(
        task=_task(payload, row), id=str(row["id"]), status=status, enqueued_at=row["created_at"],
        started_at=row["started_at"], finished_at=row["finished_at"],
        last_attempted_at=next((s for s in reversed(starts) if s is not None), row["started_at"]),
        args=payload["args"], kwargs=payload["kwargs"], backend=payload["backend"],
        errors=[_error(entry) for entry in history if entry.get("outcome") != "done"], worker_ids=workers)
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", row["result"])
    return result


def enqueued_at(job_id: UUID, *, staged: bool, queue: str, database: str) -> datetime | None:
    """When the row just written says it was enqueued: a job's ``created_at`` (the database's
    clock, as ``read`` answers it), or a staged row's ``staged_at`` (on the caller's database)."""
    if staged:
        return (OutboxEntry.objects.using(database).filter(id=job_id)
                .values_list("staged_at", flat=True).first())
    return (Job.objects.using(alias_for_queue(queue, home=database)).filter(id=job_id)
            .values_list("created_at", flat=True).first())


def enqueued(task: Any, result_id: str, args: list[Any], kwargs: dict[str, Any], backend: str,
             enqueued_at: datetime | None) -> TaskResult[..., Any]:
    """The ``TaskResult`` an enqueue answers: READY, nothing run yet, ``enqueued_at`` the row's."""
    return TaskResult(task=task, id=result_id, status=TaskResultStatus.READY, enqueued_at=enqueued_at,
                      started_at=None, finished_at=None, last_attempted_at=None, args=args, kwargs=kwargs,
                      backend=backend, errors=[], worker_ids=[])


def running(ctx: JobContext, task: Any, *, args: list[Any], kwargs: dict[str, Any], backend: str,
            priority: int, enqueued_at: str | None) -> TaskResult[..., Any]:
    """The ``TaskResult`` a running attempt hands its signals and ``TaskContext``: the row's history
    so far, this attempt's worker last. A first attempt reads nothing (no history yet; its worker id
    is read only if something looks at it): a read per task would cost more than a no-op task."""
    from django.utils import timezone

    now = timezone.now()
    if ctx.attempt == 1:
        return TaskResult(task=_as_enqueued(task, priority, ctx.queue), id=str(ctx.job_id),
                          status=TaskResultStatus.RUNNING, enqueued_at=_when(enqueued_at), started_at=now,
                          finished_at=None, last_attempted_at=now, args=args, kwargs=kwargs, backend=backend,
                          errors=[], worker_ids=_Workers(ctx.job_id, ctx.attempt, alias_for_queue(ctx.queue)))
    row = Job.objects.using(alias_for_queue(ctx.queue)).filter(id=ctx.job_id).values(*_FIELDS).first() or {}
    history = list(row.get("attempts") or [])
    result: TaskResult[..., Any] = TaskResult(
        task=_as_enqueued(task, priority, ctx.queue), id=str(ctx.job_id),
        status=TaskResultStatus.RUNNING, enqueued_at=_when(enqueued_at) or row.get("created_at"),
        started_at=row.get("started_at") or now, finished_at=None, last_attempted_at=now, args=args, kwargs=kwargs,
        backend=backend, errors=[_error(entry) for entry in history if entry.get("outcome") != "done"],
        worker_ids=[*(str(entry.get("worker") or "") for entry in history), row.get("claimed_by") or ""])
    return result


class _Workers(list[str]):
    """A running first attempt's ``worker_ids``: its length (the attempt count, what
    ``TaskContext.attempt`` reads) is known; the ids are read from the row on first look."""

    def __init__(self, job_id: Any, attempts: int, alias: str) -> None:
        super().__init__()
        self._job_id, self._attempts, self._alias, self._loaded = job_id, attempts, alias, False

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            found = (Job.objects.using(self._alias).filter(id=self._job_id)
                     .values("claimed_by", "attempts").first())
            row: dict[str, Any] = dict(found) if found else {}
            history = [str(entry.get("worker") or "") for entry in row.get("attempts") or []]
            self.extend([*history, row.get("claimed_by") or ""][-self._attempts:])

    def __len__(self) -> int:
        return self._attempts if not self._loaded else super().__len__()

    def __iter__(self) -> Any:
        self._load()
        return super().__iter__()

    def __getitem__(self, index: Any) -> Any:
        self._load()
        return super().__getitem__(index)

    def __eq__(self, other: object) -> bool:
        self._load()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment,unused-ignore]

    def __repr__(self) -> str:
        self._load()
        return super().__repr__()

    def append(self, value: str) -> None:
        self._load()
        super().append(value)


def finished(result: TaskResult[..., Any], status: Any, value: Any) -> None:
    """Mark ``result`` (a running one) finished, for ``task_finished``."""
    from django.utils import timezone

    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "_return_value", value)


def _as_enqueued(task: Any, priority: int, queue: str) -> Any:
    """``task`` with the options it was enqueued under (``using()`` validates again: only if they differ)."""
    if (task.priority, task.queue_name) == (priority, queue):
        return task
    return task.using(priority=priority, queue_name=queue)


def _task(payload: dict[str, Any], row: dict[str, Any]) -> Any:
    task = load_task(payload["task"], payload.get("task_sig"))
    run_after = payload.get("run_after")
    return task.using(priority=payload.get("priority", 0), queue_name=row["queue"],
                      run_after=_when(run_after) if run_after else None, backend=payload["backend"])


def _error(entry: dict[str, Any]) -> TaskError:
    text = entry.get("error") or ""
    if entry.get("error_code") == X_LEASE_LAPSED:
        return TaskError(exception_class_path=LAPSED_CLASS, traceback=text)
    return TaskError(exception_class_path=class_path(text), traceback=text)


def class_path(text: str) -> str:
    """The exception class a stored traceback ends with (``ExcClass: message``), as a module path."""
    lines = [line for line in text.strip().splitlines() if line and not line.startswith(" ")]
    last = lines[-1] if lines else ""
    name = last.split(":", 1)[0].strip()
    if not name or " " in name:
        return "builtins.Exception"
    return name if "." in name else f"builtins.{name}"


def _when(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
