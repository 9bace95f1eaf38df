"""Models: the job table group and the event bus, re-exported."""

from .events import JobEvent
from .jobs import Job, JobStep, QueuePause

__all__ = ["Job", "JobEvent", "JobStep", "QueuePause"]
