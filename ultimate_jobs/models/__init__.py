"""Models: the job and scheduler table groups, re-exported."""

from .jobs import Job, JobStep, QueuePause
from .scheduler import SchedulerLeader, SchedulerState

__all__ = ["Job", "JobStep", "QueuePause", "SchedulerLeader", "SchedulerState"]
