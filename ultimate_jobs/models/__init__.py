"""Models: the job and outbox table groups, re-exported."""

from .jobs import Job, JobStep, QueuePause
from .outbox import OutboxEntry

__all__ = ["Job", "JobStep", "OutboxEntry", "QueuePause"]
