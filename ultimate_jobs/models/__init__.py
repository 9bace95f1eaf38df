"""Models: the job and scheduler table groups, re-exported."""

from .jobs import Job, JobStep, QueuePause
from .leases import JobLease
from .scheduler import SchedulerLeader, SchedulerState

__all__ = ["Job", "JobLease", "JobStep", "QueuePause", "SchedulerLeader", "SchedulerState"]
