"""Models: the job table group, re-exported."""

from .jobs import Job, JobStep, QueuePause

__all__ = ["Job", "JobStep", "QueuePause"]
