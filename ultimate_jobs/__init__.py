"""ultimate_jobs: durable background work for Django, in the app's own database.

Usage::

    # myapp/jobs.py
    from ultimate_jobs import job, Retry, NO_TENANT

    @job(idempotency_key="receipt:{order_id}", tenant=NO_TENANT, retry=Retry(attempts=5))
    def send_receipt(ctx, *, order_id: int) -> None:
        ...

    send_receipt.enqueue(order_id=42)         # then: python manage.py jobs_worker

The operator API is ``ultimate_jobs.ops``; test helpers are ``ultimate_jobs.testing``.
"""

from .backfill_status import pending_backfills
from .backfills import BackfillBatch, backfill, registered_backfills
from .context import CancelToken, JobContext
from .declaration import NO_TENANT, Concurrency, JobHandle, job, registered_jobs
from .enqueue import MAX_ENQUEUE_BATCH, EnqueueResult
from .errors import JobCancelled, JobsError, RetryAfter, Terminal
from .events import publish_event
from .purges import purge
from .retry import Retry, register_error_retry, retry_schedule
from .scheduler import Scheduler
from .settled import Settled
from .steps import Suspension
from .tasks import TaskHandle, registered_tasks, task
from .worker import Worker

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
    "job",
    "pending_backfills",
    "publish_event",
    "purge",
    "register_error_retry",
    "registered_backfills",
    "registered_jobs",
    "registered_tasks",
    "retry_schedule",
    "task",
]
