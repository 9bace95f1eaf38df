"""Models: the job table group and the operator tables, re-exported."""

from .jobs import Job, JobStep, QueuePause
from .operations import JobCounter, WorkerHeartbeat

__all__ = ["Job", "JobCounter", "JobStep", "QueuePause", "WorkerHeartbeat"]
