"""The operator API for scheduled tasks, re-exported by ``ultimate_jobs.ops``.

Usage::

    from datetime import UTC, datetime
    from ultimate_jobs import ops

    ops.pause_task("nightly-digest")            # fires nothing until resumed
    ops.paused_tasks()                           # -> ["nightly-digest"]
    ops.resume_task("nightly-digest")           # missed occurrences: the task's catch_up decides
    ops.task_fires()                             # -> [{"name", "last_fired_at", "next_run_at", ...}]
    ops.next_task_run("nightly-digest", datetime(2026, 3, 28, tzinfo=UTC))   # -> aware UTC datetime

Options (default): every function takes a task handle or its name; ``task_fires(task=None)``
answers every registered task, sorted by name; ``next_task_run(task, after=None)`` answers the
first occurrence strictly after ``after`` (default: now), computed by the scheduler's own
resolver. Timestamps in dicts are ISO 8601 strings in UTC.

Raises ``X_TASK_NOT_FOUND`` for a task not declared in this process, ``X_JOB_INPUT_INVALID``
for a naive or non-datetime ``after``.

Logged events: ``jobs.scheduler.paused``, ``jobs.scheduler.resumed``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, X_TASK_NOT_FOUND, JobsError
from ultimate_jobs.models import SchedulerState
from ultimate_jobs.ops import audit
from ultimate_jobs.ops.types import TaskFire
from ultimate_jobs.schedule import watermarks
from ultimate_jobs.schedule.declarations import TaskHandle, get_task, registered_tasks

if TYPE_CHECKING:
    from ultimate_jobs.ops.audit import Actor

log = logging.getLogger("ultimate_jobs")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _handle(task: TaskHandle | str) -> TaskHandle:
    name = task.name if isinstance(task, TaskHandle) else task
    handle = get_task(name) if isinstance(name, str) else None
    if handle is None:
        raise JobsError(X_TASK_NOT_FOUND, f"No task is declared on the name {task!r} in this process.")
    return handle


def pause_task(task: TaskHandle | str, *, by: Actor = None) -> TaskFire:
    """Pause a task: nothing fires for it until ``resume_task``. Answer its ``task_fires`` row.
    ``by``: who (a user or a name), logged and kept in the admin's history."""
    handle = _handle(task)
    watermarks.set_paused(get_settings().DATABASE, handle.name, paused=True, now=clock.now())
    audit.record(by, "Paused", [(handle.name, f"task {handle.name}")], model=SchedulerState)
    log.info("jobs.scheduler.paused task=%s by=%s", handle.name, audit.who(by))
    return task_fires(handle)[0]


def resume_task(task: TaskHandle | str, *, by: Actor = None) -> TaskFire:
    """Resume a paused task; occurrences missed meanwhile are handled by its ``catch_up`` policy."""
    handle = _handle(task)
    watermarks.set_paused(get_settings().DATABASE, handle.name, paused=False, now=clock.now())
    audit.record(by, "Resumed", [(handle.name, f"task {handle.name}")], model=SchedulerState)
    log.info("jobs.scheduler.resumed task=%s by=%s", handle.name, audit.who(by))
    return task_fires(handle)[0]


def paused_tasks() -> list[str]:
    """The names of the paused tasks, sorted."""
    rows = SchedulerState.objects.using(get_settings().DATABASE).filter(paused=True)
    return sorted(rows.values_list("name", flat=True))


def task_fires(task: TaskHandle | str | None = None) -> list[TaskFire]:
    """Per task: its declaration, ``paused``, ``watermark``, ``last_occurrence``, ``last_fired_at``,
    ``fires`` (occurrences fired so far), ``next_run_at`` (None while paused) and ``missed_since``
    (the first occurrence past the watermark that is already due, None when the scheduler is current)."""
    handles = registered_tasks() if task is None else [_handle(task)]
    rows = watermarks.rows(get_settings().DATABASE, [h.name for h in handles])
    now = clock.now()
    answer = []
    for handle in handles:
        row = rows.get(handle.name, {})
        paused = bool(row.get("paused", False))
        watermark = row.get("watermark")
        first_after = handle.schedule.next_after(watermark) if watermark is not None else None
        answer.append(cast(TaskFire, {
            **handle.describe(),
            "paused": paused,
            "armed": watermark is not None,
            "watermark": _iso(watermark),
            "last_occurrence": _iso(row.get("last_occurrence")),
            "last_fired_at": _iso(row.get("last_fired_at")),
            "fires": int(row.get("fires", 0)),
            "next_run_at": None if paused else _iso(handle.schedule.next_after(now)),
            "missed_since": _iso(first_after) if first_after is not None and first_after <= now else None,
        }))
    return answer


def next_task_run(task: TaskHandle | str, after: datetime | None = None) -> datetime:
    """The first occurrence of ``task`` strictly after ``after`` (an aware datetime; default now),
    as an aware UTC datetime, daylight-saving rules applied."""
    handle = _handle(task)
    if after is None:
        after = clock.now()
    if not isinstance(after, datetime) or after.tzinfo is None or after.utcoffset() is None:
        raise JobsError(X_JOB_INPUT_INVALID, f"next_task_run(after={after!r}) needs an aware datetime.",
                        "Pass datetime(..., tzinfo=UTC) or django.utils.timezone.now().")
    return handle.next_run(after.astimezone(UTC))
