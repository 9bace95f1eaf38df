"""Models: the job table group, re-exported."""

from .jobs import Job, JobStep, QueuePause
from .leases import JobLease

__all__ = ["Job", "JobLease", "JobStep", "QueuePause"]
