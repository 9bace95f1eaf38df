"""Internal: the running Tasks framework — ``django.tasks`` on Django 6, the ``django-tasks``
backport (>= 0.12) on Django 5.2 — under one set of names, so the backend never asks which.

The exceptions are the framework's own (``InvalidTask`` on Django 6, ``InvalidTaskError`` in the
backport): code that catches them keeps working whatever backend is configured.
"""

from __future__ import annotations

from typing import Any

from ultimate_jobs.errors import X_TASKS_UNAVAILABLE, JobsError

try:  # Django 6: the framework is built in
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Django 5.2: the backport, installed by the `tasks` extra
    try:
        from django_tasks import (  # type: ignore[assignment,no-redef,unused-ignore]
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
        from django_tasks.backends.base import BaseTaskBackend  # type: ignore[assignment,no-redef,unused-ignore]
        from django_tasks.base import Task, TaskError  # type: ignore[assignment,no-redef,unused-ignore]
        from django_tasks.exceptions import (  # type: ignore[assignment,no-redef,unused-ignore]
            InvalidTaskError,
            TaskResultDoesNotExist,
        )
        from django_tasks.signals import (  # type: ignore[assignment,no-redef,unused-ignore]
            task_enqueued,
            task_finished,
            task_started,
        )
        from django_tasks.utils import normalize_json  # type: ignore[no-redef,unused-ignore]
    except ImportError:
        raise JobsError(X_TASKS_UNAVAILABLE, "ultimate_jobs.contrib.tasks needs Django's Tasks framework: "
                        "django.tasks (Django 6) or the django-tasks backport (Django 5.2); neither imports.") from None

__all__ = [
    "BaseTaskBackend", "InvalidTaskError", "Task", "TaskContext", "TaskError", "TaskResult", "TaskResultDoesNotExist",
    "TaskResultStatus", "module_path", "normalize_json", "task", "task_backends", "task_enqueued", "task_finished",
    "task_started",
]


def module_path(value: Any) -> str:
    """``module.qualname``: how the framework names a task's function and an exception's class."""
    return f"{value.__module__}.{value.__qualname__}"
