"""Internal: the one job every Django task runs as, and the run of one task inside it.

Every ``@task`` enqueued through ``UltimateJobsBackend`` becomes a row of the job ``django_tasks``
whose input names the task by module path (``{"task": "app.tasks.send", "args": [...],
"kwargs": {...}, ...}``). One job name means a worker runs every task without knowing it in
advance: it imports the task by path when a row arrives, as Django's own database backend does.
Each row carries its own ``max_attempts`` (1 unless a retry policy says more); the delay before
the next attempt comes from the task's policy (``retry_for``), handed to the worker through the
``X_TASK_RETRY`` retry-after code, so the stored error stays the task's own traceback.
"""

from __future__ import annotations

import contextvars
import inspect
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync

from ultimate_jobs.context import JobContext
from ultimate_jobs.contrib.tasks.declared import TASK_JOB, load_task, retry_for
from ultimate_jobs.declaration import job
from ultimate_jobs.errors import X_TASK_RETRY
from ultimate_jobs.inputs import NO_TENANT
from ultimate_jobs.retry import Retry, register_error_retry
from ultimate_jobs.runtime.aio import run_body
from ultimate_jobs.runtime.async_steps import async_context

# The retry delay is the task policy's own: the handle's cap must not clip it.
_UNCAPPED = Retry(attempts=1, max_delay=365 * 24 * 3600.0)

register_error_retry({X_TASK_RETRY: "retry-after"})

# The running task's (TaskContext, JobContext), for job_context(context).
CURRENT: contextvars.ContextVar[tuple[Any, JobContext] | None] = contextvars.ContextVar(
    "ultimate_jobs_task_context", default=None)


def _key(**values: Any) -> str:
    return str(values["key"])


class _SystemExit(Exception):  # noqa: N818 (it stands in for SystemExit)
    """A task's ``SystemExit``, carried as an ordinary failure so the worker's thread goes on; named
    ``SystemExit`` so the stored traceback ends ``SystemExit: <code>`` as the framework records it."""


_SystemExit.__name__ = _SystemExit.__qualname__ = "SystemExit"
_SystemExit.__module__ = "builtins"


@job(name=TASK_JOB, idempotency_key=_key, tenant=NO_TENANT, retry=_UNCAPPED)
def run_task(ctx: JobContext, *, task: str, args: list[Any], kwargs: dict[str, Any], backend: str,
             key: str, priority: int = 0, run_after: str | None = None, enqueued_at: str | None = None,
             task_sig: str | None = None) -> Any:
    """Run one Django task: import it, build its ``TaskResult`` and ``TaskContext``, send the
    framework's signals, call it, and answer its return value (JSON-normalized, as Django does)."""
    from ultimate_jobs.contrib.tasks import results
    from ultimate_jobs.contrib.tasks.framework import (
        TaskContext,
        TaskResultStatus,
        normalize_json,
        task_backends,
        task_finished,
        task_started,
    )

    backend_object = task_backends[backend]
    task_object = load_task(task, task_sig)  # a path not signed by the backend is never imported
    result = results.running(ctx, task_object, args=args, kwargs=kwargs, backend=backend, priority=priority,
                             enqueued_at=enqueued_at)
    sender = type(backend_object)
    task_started.send(sender=sender, task_result=result)
    policy = retry_for(task_object, backend_object)
    is_async = inspect.iscoroutinefunction(task_object.func)
    job_ctx = async_context(ctx) if is_async else ctx  # an async task's job_context: steps as coroutines
    try:
        with _current(TaskContext(task_result=result) if task_object.takes_context else None, job_ctx) as context:
            call_args = [context, *args] if context is not None else list(args)
            value = _call(task_object.func, call_args, kwargs, job_ctx) if is_async else task_object.func(
                *call_args, **kwargs)
            value = normalize_json(value)
    except SystemExit as exc:  # a task's exit fails the task, never the worker's thread
        error: Exception = _SystemExit(*exc.args).with_traceback(exc.__traceback__)
        _finish_failed(ctx, policy, result, sender, error)
        raise error from None
    except Exception as exc:
        _finish_failed(ctx, policy, result, sender, exc)
        raise
    results.finished(result, TaskResultStatus.SUCCESSFUL, value)
    task_finished.send(sender=sender, task_result=result)
    return value


def _call(func: Any, args: list[Any], kwargs: dict[str, Any], ctx: JobContext) -> Any:
    """An ``async def`` task, run to its end from this ``def`` job's thread. Under ``async_to_sync``
    the statements its steps send run back on this thread (its connection, as a ``def`` task's);
    its task is cancelled once ``ctx.cancelled`` is set, as an ``async def`` job's body is."""

    async def run() -> Any:
        try:
            return await run_body(ctx.cancelled, func(*args, **kwargs))
        finally:
            await ctx._progress.landed()

    return async_to_sync(run)()


def _finish_failed(ctx: JobContext, policy: Retry, result: Any, sender: type, error: BaseException) -> None:
    """A failed attempt: tag a retry with the policy's delay, or report the task finished FAILED."""
    from ultimate_jobs.contrib.tasks import results
    from ultimate_jobs.contrib.tasks.framework import TaskError, TaskResultStatus, module_path, task_finished

    if ctx.attempt < ctx.max_attempts:
        try:  # read by retry.classify: retry after the task's own backoff
            error.code = X_TASK_RETRY  # type: ignore[attr-defined]
            error.retry_after = policy.delay_after(ctx.attempt)  # type: ignore[attr-defined]
        except AttributeError:  # an exception with __slots__: retried at once
            pass
        return
    result.errors.append(TaskError(exception_class_path=module_path(type(error)),
                                   traceback="".join(traceback.format_exception(error))))
    results.finished(result, TaskResultStatus.FAILED, None)
    task_finished.send(sender=sender, task_result=result)


@contextmanager
def _current(context: Any, ctx: JobContext) -> Iterator[Any]:
    token = CURRENT.set((context, ctx))
    try:
        yield context
    finally:
        CURRENT.reset(token)
