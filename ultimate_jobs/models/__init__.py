"""Models: the job, event, outbox, scheduler, operator and backfill table groups, re-exported."""

from .backfills import BackfillRun
from .events import JobEvent
from .jobs import Job, JobStep, QueuePause
from .leases import JobLease
from .operations import JobCounter, WorkerHeartbeat
from .outbox import OutboxEntry
from .scheduler import SchedulerLeader, SchedulerState

__all__ = ["BackfillRun", "Job", "JobCounter", "JobEvent", "JobLease", "JobStep", "OutboxEntry", "QueuePause",
           "SchedulerLeader", "SchedulerState", "WorkerHeartbeat"]
