"""Internal: what a queue name and a job name may be, checked in one place.

Settings (``QUEUES``), declarations (``@job``, ``task()``, the factories), per-call options and
the operator's queue actions all check names here, so one rule holds everywhere.
"""

from __future__ import annotations

import re

from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, X_QUEUE_INVALID, JobsError

QUEUE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.:-]{0,63}$")
MAX_JOB_NAME_CHARS = 200


def check_queue_name(queue: object, *, code: str = X_QUEUE_INVALID) -> str:
    """Answer ``queue`` when it matches ``^[a-z0-9][a-z0-9_.:-]{0,63}$``; else raise ``code``."""
    if not isinstance(queue, str) or not QUEUE_PATTERN.match(queue):
        raise JobsError(code, f"queue={queue!r} is not a valid queue name.", None if code == X_QUEUE_INVALID
                        else "Use a queue name matching ^[a-z0-9][a-z0-9_.:-]{0,63}$.")
    return queue


def check_job_name(name: object) -> str:
    """Answer ``name`` when it is 1-200 printable characters, unpadded; else raise ``X_JOB_DECLARATION_INVALID``."""
    if (not isinstance(name, str) or not 1 <= len(name) <= MAX_JOB_NAME_CHARS or not name.isprintable()
            or name != name.strip()):
        raise JobsError(X_JOB_DECLARATION_INVALID, f"name={name!r} is not a job name.",
                        "Use 1-200 printable characters without leading or trailing spaces.")
    return name
