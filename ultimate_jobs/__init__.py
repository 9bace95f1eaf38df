"""ultimate_jobs: durable background work for Django, in the app's own database.

Usage::

    # myapp/jobs.py
    from ultimate_jobs import job, Retry, NO_TENANT

    @job(idempotency_key="receipt:{order_id}", tenant=NO_TENANT, retry=Retry(attempts=5))
    def send_receipt(ctx, *, order_id: int) -> None:
        ...

    send_receipt.enqueue(order_id=42)         # then: python manage.py jobs_worker

The operator API is ``ultimate_jobs.ops``; test helpers are ``ultimate_jobs.testing``.

Each public name is imported on first use (PEP 562), so ``import ultimate_jobs`` loads nothing
else: settings modules and app modules can import it before Django's app registry is ready, and
the modules below can import the models at their top. ``docs/architecture.md`` maps the package.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "BackfillBatch": "ultimate_jobs.factories.backfill.declaration",
    "CancelToken": "ultimate_jobs.context",
    "Concurrency": "ultimate_jobs.concurrency",
    "EnqueueResult": "ultimate_jobs.enqueue",
    "JobCancelled": "ultimate_jobs.errors",
    "JobContext": "ultimate_jobs.context",
    "JobHandle": "ultimate_jobs.handle",
    "JobsError": "ultimate_jobs.errors",
    "MAX_ENQUEUE_BATCH": "ultimate_jobs.enqueue",
    "NO_TENANT": "ultimate_jobs.inputs",
    "Retry": "ultimate_jobs.retry",
    "RetryAfter": "ultimate_jobs.errors",
    "Scheduler": "ultimate_jobs.schedule.scheduler",
    "Settled": "ultimate_jobs.runtime.on_settled",
    "Suspension": "ultimate_jobs.runtime.steps",
    "TaskHandle": "ultimate_jobs.schedule.declarations",
    "Terminal": "ultimate_jobs.errors",
    "Worker": "ultimate_jobs.runtime.worker",
    "backfill": "ultimate_jobs.factories.backfill.declaration",
    "get_job_handle": "ultimate_jobs.registry",
    "job": "ultimate_jobs.declaration",
    "pending_backfills": "ultimate_jobs.factories.backfill.status",
    "publish_event": "ultimate_jobs.events",
    "purge": "ultimate_jobs.factories.purge",
    "register_error_retry": "ultimate_jobs.retry",
    "registered_backfills": "ultimate_jobs.factories.backfill.declaration",
    "registered_jobs": "ultimate_jobs.registry",
    "registered_tasks": "ultimate_jobs.schedule.declarations",
    "retry_schedule": "ultimate_jobs.retry",
    "task": "ultimate_jobs.schedule.declarations",
    "consumer": "ultimate_jobs.factories.consumer",
    "verify_webhook_signature": "ultimate_jobs.factories.webhook.signing",
    "webhook": "ultimate_jobs.factories.webhook.declaration",
    "webhook_receiver": "ultimate_jobs.factories.webhook_receiver",
    "define_subject": "ultimate_jobs.factories.subject.declaration",
    "export_rows": "ultimate_jobs.factories.export_rows",
    "import_rows": "ultimate_jobs.factories.import_rows.declaration",
    "refresh_view": "ultimate_jobs.factories.refresh_view",
    "rollup": "ultimate_jobs.factories.rollup",
    "subject_erase": "ultimate_jobs.factories.subject.erase",
    "subject_export": "ultimate_jobs.factories.subject.export",
}

__all__ = [
    "BackfillBatch",
    "CancelToken",
    "Concurrency",
    "EnqueueResult",
    "JobCancelled",
    "JobContext",
    "JobHandle",
    "JobsError",
    "MAX_ENQUEUE_BATCH",
    "NO_TENANT",
    "Retry",
    "RetryAfter",
    "Scheduler",
    "Settled",
    "Suspension",
    "TaskHandle",
    "Terminal",
    "Worker",
    "backfill",
    "consumer",
    "define_subject",
    "export_rows",
    "get_job_handle",
    "import_rows",
    "job",
    "pending_backfills",
    "publish_event",
    "purge",
    "refresh_view",
    "register_error_retry",
    "registered_backfills",
    "registered_jobs",
    "registered_tasks",
    "retry_schedule",
    "rollup",
    "subject_erase",
    "subject_export",
    "task",
    "verify_webhook_signature",
    "webhook",
    "webhook_receiver",
]


def __getattr__(name: str) -> object:
    """Import a public name, or a submodule such as ``ops`` or ``testing``, on first use."""
    home = _EXPORTS.get(name)
    if home is not None:
        value = getattr(_importlib.import_module(home), name)
        globals()[name] = value
        return value
    try:
        return _importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if _TYPE_CHECKING:  # what a type checker and an IDE see: the same names, imported eagerly
    from ultimate_jobs.concurrency import Concurrency
    from ultimate_jobs.context import CancelToken, JobContext
    from ultimate_jobs.declaration import job
    from ultimate_jobs.enqueue import MAX_ENQUEUE_BATCH, EnqueueResult
    from ultimate_jobs.errors import JobCancelled, JobsError, RetryAfter, Terminal
    from ultimate_jobs.events import publish_event
    from ultimate_jobs.factories.backfill.declaration import BackfillBatch, backfill, registered_backfills
    from ultimate_jobs.factories.backfill.status import pending_backfills
    from ultimate_jobs.factories.consumer import consumer
    from ultimate_jobs.factories.export_rows import export_rows
    from ultimate_jobs.factories.import_rows.declaration import import_rows
    from ultimate_jobs.factories.purge import purge
    from ultimate_jobs.factories.refresh_view import refresh_view
    from ultimate_jobs.factories.rollup import rollup
    from ultimate_jobs.factories.subject.declaration import define_subject
    from ultimate_jobs.factories.subject.erase import subject_erase
    from ultimate_jobs.factories.subject.export import subject_export
    from ultimate_jobs.factories.webhook.declaration import webhook
    from ultimate_jobs.factories.webhook.signing import verify_webhook_signature
    from ultimate_jobs.factories.webhook_receiver import webhook_receiver
    from ultimate_jobs.handle import JobHandle
    from ultimate_jobs.inputs import NO_TENANT
    from ultimate_jobs.registry import get_job_handle, registered_jobs
    from ultimate_jobs.retry import Retry, register_error_retry, retry_schedule
    from ultimate_jobs.runtime.on_settled import Settled
    from ultimate_jobs.runtime.steps import Suspension
    from ultimate_jobs.runtime.worker import Worker
    from ultimate_jobs.schedule.declarations import TaskHandle, registered_tasks, task
    from ultimate_jobs.schedule.scheduler import Scheduler
