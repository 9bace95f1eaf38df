"""Models: the job, event, outbox, scheduler, operator, backfill and webhook table groups, re-exported."""

from ultimate_jobs.models.backfills import BackfillRun
from ultimate_jobs.models.events import JobEvent
from ultimate_jobs.models.jobs import Job, JobStep, QueuePause
from ultimate_jobs.models.operations import JobCounter, WorkerHeartbeat
from ultimate_jobs.models.outbox import OutboxEntry
from ultimate_jobs.models.scheduler import SchedulerLeader, SchedulerState
from ultimate_jobs.models.slots import FleetSlot
from ultimate_jobs.models.webhooks import ConsumerState, WebhookDelivery, WebhookEndpointState, WebhookReceipt

__all__ = ["BackfillRun", "ConsumerState", "Job", "JobCounter", "JobEvent", "FleetSlot", "JobStep", "OutboxEntry",
           "QueuePause", "SchedulerLeader", "SchedulerState", "WebhookDelivery", "WebhookEndpointState",
           "WebhookReceipt", "WorkerHeartbeat"]
