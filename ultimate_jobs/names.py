"""Internal: what a queue name, a job name and a free-text value may be, checked in one place.

Settings (``QUEUES``), declarations (``@job``, ``task()``, the factories), per-call options and
the operator's queue actions all check names here, so one rule holds everywhere. Patterns end in
``\\Z``, never ``$``: ``$`` also matches before a trailing newline, so ``"default\\n"`` would pass.
``check_text`` guards free text on its way to the database (PostgreSQL cannot store NUL).
"""

from __future__ import annotations

import re

from ultimate_jobs.errors import X_JOB_DECLARATION_INVALID, X_QUEUE_INVALID, X_TEXT_INVALID, JobsError

QUEUE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.:-]{0,63}\Z")
MAX_JOB_NAME_CHARS = 200
# The one job every django.tasks task runs as (contrib.tasks); its input names the task's module
# path, which the operator surfaces show and filter by.
TASK_JOB = "django_tasks"


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


def check_text(value: object, *, subject: str, max_chars: int, code: str = X_TEXT_INVALID) -> str:
    """Answer ``value`` when it is a string of at most ``max_chars`` characters without NUL; else
    raise ``code`` (``X_TEXT_INVALID`` unless the caller's surface has its own)."""
    if not isinstance(value, str) or len(value) > max_chars or "\x00" in value:
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:60]) + "..."
        raise JobsError(code, f"{subject}={shown} must be a string of at most {max_chars} characters without NUL.",
                        None if code == X_TEXT_INVALID else "Pass a short string without NUL (\\x00) characters.")
    return value
