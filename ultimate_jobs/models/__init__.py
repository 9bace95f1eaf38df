"""Models: the job, scheduler and operator table groups, re-exported."""

from .jobs import Job, JobStep, QueuePause
from .leases import JobLease
from .operations import JobCounter, WorkerHeartbeat
from .scheduler import SchedulerLeader, SchedulerState

__all__ = ["Job", "JobCounter", "JobLease", "JobStep", "QueuePause", "SchedulerLeader", "SchedulerState",
           "WorkerHeartbeat"]
