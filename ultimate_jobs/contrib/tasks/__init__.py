"""``ultimate_jobs.contrib.tasks``: a backend for Django's Tasks framework (``django.tasks`` on
Django 6, the ``django-tasks`` backport on 5.2, installed by ``pip install ultimate-jobs[tasks]``).

Usage::

    TASKS = {"default": {"BACKEND": "ultimate_jobs.contrib.tasks.UltimateJobsBackend",
                         "QUEUES": ["default", "emails"], "OPTIONS": {"retry": Retry(attempts=3)}}}

    @task(takes_context=True)
    @retry(attempts=5, delay="2s")
    def import_feed(context, url: str) -> int:
        ctx = job_context(context)                       # the run's JobContext
        rows = ctx.step.run("fetch", lambda: fetch(url))  # checkpointed: a retry does not fetch again
        return len(rows)

Options: ``retry(policy=None, **Retry options)`` per task (decorate the function under ``@task``);
``job_context(context)`` answers the running task's ``JobContext`` (durable steps, progress, the
cancel token). Raises ``X_TASKS_UNAVAILABLE`` (on import) when neither framework imports, and
``X_TASK_CONTEXT_INVALID`` from ``job_context`` for a context that is not the running task's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ultimate_jobs.context import JobContext
from ultimate_jobs.contrib.tasks.backend import UltimateJobsBackend
from ultimate_jobs.contrib.tasks.declared import RETRY_ATTRIBUTE
from ultimate_jobs.contrib.tasks.runner import CURRENT
from ultimate_jobs.errors import X_TASK_CONTEXT_INVALID, JobsError
from ultimate_jobs.retry import Retry

__all__ = ["UltimateJobsBackend", "job_context", "retry"]

F = TypeVar("F", bound=Callable[..., Any])


def retry(policy: Retry | int | None = None, **options: Any) -> Callable[[F], F]:
    """Give one task its retry policy: ``@retry(attempts=5, delay="2s")`` (``Retry``'s options) or
    ``@retry(Retry(...))``, under ``@task``. Overrides the backend's ``OPTIONS["retry"]``."""
    chosen = Retry.coerce(policy) if policy is not None else Retry(**options)

    def apply(fn: F) -> F:
        target = getattr(fn, "func", fn)  # above @task: the Task's function
        setattr(target, RETRY_ATTRIBUTE, chosen)
        return fn

    return apply


def job_context(context: Any) -> JobContext:
    """The running task's ``JobContext``: ``ctx.step.run(...)``, ``ctx.progress(...)``, ``ctx.cancelled``."""
    current = CURRENT.get()
    if current is None or current[0] is not context:
        raise JobsError(X_TASK_CONTEXT_INVALID, "job_context() was given a context that is not the running "
                        "task's (call it inside a takes_context=True task, with its context).")
    return current[1]
