"""Internal: what the backend and the worker agree on about a task — the job name every Django
task runs as, how a task is found by module path, and which retry policy it runs under."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.utils.module_loading import import_string

from ultimate_jobs.names import TASK_JOB as TASK_JOB  # defined below the operator API, which reads it too
from ultimate_jobs.retry import Retry

RETRY_ATTRIBUTE = "_ultimate_jobs_retry"
NO_RETRY = Retry(attempts=1)


def load_task(path: str) -> Any:
    """The ``Task`` a module path names (the decorated function's module binding); a path that
    names anything else (a row written by hand: ``subprocess.check_output``) is refused, never called."""
    from ultimate_jobs.contrib.tasks.framework import Task

    found = import_string(path)
    if not isinstance(found, Task):
        raise SuspiciousOperation(f"{path!r} does not point to a Task.")
    return found


def retry_for(task: Any, backend: Any) -> Retry:
    """The policy of ``task``: its own ``retry(...)``, else the backend's ``OPTIONS["retry"]``, else none."""
    own = getattr(task.func, RETRY_ATTRIBUTE, None)
    if own is not None:
        return own  # type: ignore[no-any-return,unused-ignore]
    return getattr(backend, "retry", None) or NO_RETRY
