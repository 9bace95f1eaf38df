"""Internal: ``UltimateJobsBackend``, the backend Django's Tasks framework calls.

``enqueue`` validates the task the framework's way (its own invalid-task exception), refuses
arguments that do not survive a JSON round trip (``TypeError``), maps the priority (Django's
larger-runs-sooner onto the job's lower-runs-first) and writes one ``django_tasks`` row through
``enqueue.submit`` — the path every ``@job`` enqueue takes, so inside ``transaction.atomic()`` the
row is staged in the outbox and a rollback means the task never existed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.module_loading import import_string

from ultimate_jobs.conf import get_settings
from ultimate_jobs.contrib.tasks import results
from ultimate_jobs.contrib.tasks.declared import retry_for, sign_path
from ultimate_jobs.contrib.tasks.framework import (
    BaseTaskBackend,
    Task,
    TaskResult,
    normalize_json,
    task_enqueued,
)
from ultimate_jobs.contrib.tasks.runner import run_task
from ultimate_jobs.enqueue import submit
from ultimate_jobs.errors import JobsError
from ultimate_jobs.ids import uuid7
from ultimate_jobs.names import check_queue_name
from ultimate_jobs.retry import Retry


class UltimateJobsBackend(BaseTaskBackend):  # type: ignore[misc,valid-type,unused-ignore]
    """Every ``@task`` a durable job: ``TASKS = {"default": {"BACKEND":
    "ultimate_jobs.contrib.tasks.UltimateJobsBackend", "QUEUES": [...], "OPTIONS": {...}}}``.

    ``OPTIONS``: ``"retry"`` (a ``Retry`` or an attempt count; none by default, as Django's
    contract has it), ``"key"`` (a callable or dotted path ``(task, args, kwargs) -> str | None``:
    an idempotency key, so a second enqueue with the same key while the first is live answers the
    first), ``"database"`` (the jobs database alias; ``ULTIMATE_JOBS["DATABASE"]`` by default).
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(params.get("OPTIONS") or {})
        self.options = options
        for queue in self.queues:
            try:
                check_queue_name(queue)
            except JobsError as err:
                raise ImproperlyConfigured(f"TASKS[{alias!r}]['QUEUES']: {err.cause}") from None
        policy = options.get("retry")
        try:
            self.retry: Retry | None = None if policy is None else Retry.coerce(policy)
        except JobsError as err:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']['retry']: {err.cause}") from None
        key = options.get("key")
        self.key: Callable[..., str | None] | None = import_string(key) if isinstance(key, str) else key
        self.database: str | None = options.get("database")

    def enqueue(self, task: Task[..., Any], args: Any, kwargs: Any) -> TaskResult[..., Any]:  # type: ignore[override,unused-ignore]
        self.validate_task(task)
        args_json, kwargs_json = _round_trip(list(args)), _round_trip(dict(kwargs))
        key = self.key(task, args_json, kwargs_json) if self.key is not None else None
        # task_sig: the worker imports a path outside the installed apps only with it (declared.load_task).
        payload = {"task": task.module_path, "task_sig": sign_path(task.module_path), "args": args_json,
                   "kwargs": kwargs_json, "backend": self.alias,
                   "key": str(key) if key is not None else str(uuid7()), "priority": task.priority,
                   "run_after": task.run_after.isoformat() if task.run_after is not None else None,
                   "enqueued_at": timezone.now().isoformat()}
        bound = run_task.using(queue=task.queue_name, priority=-task.priority, run_at=task.run_after,
                               database=self.database)
        row = dataclasses.replace(bound.row(payload), max_attempts=retry_for(task, self).attempts)
        database = self.database or get_settings().DATABASE
        written = submit([row], database=database)[0]
        if written.deduped:
            result = self.get_result(str(written.id))
        else:  # enqueued_at as the row holds it, so get_result(id) answers this very result
            enqueued_at = results.enqueued_at(written.id, staged=written.staged, queue=row.queue, database=database)
            result = results.enqueued(task, str(written.id), args_json, kwargs_json, self.alias, enqueued_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[..., Any]:  # type: ignore[override,unused-ignore]
        return results.read(result_id, database=self.database or get_settings().DATABASE)


def _round_trip(value: Any) -> Any:
    """``value`` as JSON gives it back; ``TypeError`` when that is not ``value`` itself (Django's rule:
    a task's arguments are stored as JSON and must read back equal)."""
    normalized = normalize_json(value)
    if json.loads(json.dumps(normalized)) != normalized:
        raise TypeError(f"Task arguments must survive a JSON round trip unchanged: {value!r}")
    return normalized


__all__ = ["UltimateJobsBackend"]
