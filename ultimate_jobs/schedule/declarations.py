"""``task()``: declare a scheduled task, a cron schedule in an IANA zone that enqueues a job.

Usage::

    # myapp/jobs.py — declared beside the jobs, discovered at startup
    from ultimate_jobs import NO_TENANT, job, task

    @job(idempotency_key="digest:{kind}", tenant=NO_TENANT)
    def send_digest(ctx, *, kind: str) -> None:
        ...

    nightly = task(name="nightly-digest", cron="0 3 * * *", tz="Europe/Berlin",
                   job=send_digest, input={"kind": "daily"}, catch_up="skip")

    nightly.enqueue()                  # a manual run now, under the job's plain key

Options (default): ``name``, ``cron`` (five fields or ``@hourly``-style aliases), ``tz`` (an
IANA name: required, no default, no offsets), ``job`` (a ``@job`` handle), ``input`` (None:
no arguments; a dict, or ``callable(occurrence) -> dict | list[dict]`` given the occurrence as
an aware UTC datetime, one job per dict), ``catch_up`` ("skip": after downtime fire the latest
missed occurrence; "run-once": fire one catch-up, the earliest considered; "run-all": fire each
considered), ``max_catch_up`` (10, at most 1,000: how many of the most recent missed
occurrences a round considers).

A task never holds a body. The scheduler fires an occurrence under the key
``"<task>:<occurrence epoch ms>:<job key>"`` so no two schedulers fire one tick twice.
Refusals at import time: ``X_TASK_DECLARATION_INVALID``, ``X_TASK_DUPLICATE``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ultimate_jobs import clock
from ultimate_jobs.errors import X_JOB_INPUT_INVALID, X_TASK_DECLARATION_INVALID, X_TASK_DUPLICATE, JobsError
from ultimate_jobs.handle import AnyJobHandle, JobHandle
from ultimate_jobs.names import check_job_name
from ultimate_jobs.schedule.cron import Schedule

if TYPE_CHECKING:
    from ultimate_jobs.db.store import JobRow
    from ultimate_jobs.enqueue import EnqueueResult

CATCH_UP = ("skip", "run-once", "run-all")
MAX_CATCH_UP_LIMIT = 1000

Input = Mapping[str, Any] | Callable[[datetime], Any] | None

_registry: dict[str, TaskHandle] = {}
_registry_lock = threading.Lock()


def registered_tasks() -> list[TaskHandle]:
    """Every declared task, sorted by name in code-point order."""
    return [_registry[name] for name in sorted(_registry)]


def get_task(name: str) -> TaskHandle | None:
    return _registry.get(name)


def _unregister(name: str) -> None:
    """Test support: forget a declaration."""
    with _registry_lock:
        _registry.pop(name, None)


def occurrence_ms(occurrence: datetime) -> int:
    """An occurrence as epoch milliseconds: the middle part of its jobs' keys."""
    return int(occurrence.timestamp() * 1000)


class TaskHandle:
    """A declared task: its schedule, its job and its catch-up policy."""

    def __init__(self, *, name: str, cron: str, tz: str, job: AnyJobHandle, input: Input, catch_up: str,
                 max_catch_up: int, source: str) -> None:
        code = X_TASK_DECLARATION_INVALID
        try:
            self.name = check_job_name(name)
        except JobsError as err:
            raise JobsError(code, f"task {err.cause}", err.fix) from None
        self.schedule = Schedule.parse(cron, tz)
        self.cron, self.tz = self.schedule.cron, tz
        if not isinstance(job, JobHandle):
            raise JobsError(code, f"task {name!r}: job={job!r} is not a @job handle.",
                            "Pass the function decorated with @job, not its name or the plain function.")
        self.job = job
        if catch_up not in CATCH_UP:
            raise JobsError(code, f"task {name!r}: catch_up={catch_up!r} is not one of "
                            f"{', '.join(CATCH_UP)}.")
        self.catch_up = catch_up
        if isinstance(max_catch_up, bool) or not isinstance(max_catch_up, int) or not (
                1 <= max_catch_up <= MAX_CATCH_UP_LIMIT):
            raise JobsError(code, f"task {name!r}: max_catch_up={max_catch_up!r} must be a whole number "
                            f"from 1 to {MAX_CATCH_UP_LIMIT}.")
        self.max_catch_up = max_catch_up
        if input is None:
            input = {}
        if isinstance(input, Mapping):
            try:  # a fixed input is checked against the job's signature now, not at 3 a.m.
                job.encode_input(input)
            except JobsError as err:
                raise JobsError(code, f"task {name!r}: input does not fit {job.name}: {err.cause}") from None
            input = dict(input)
        elif not callable(input):
            raise JobsError(code, f"task {name!r}: input={input!r} is neither a dict nor a "
                            "callable(occurrence) -> dict | list[dict].")
        self.input = input
        self.source = source

    def __repr__(self) -> str:
        return f"<TaskHandle {self.name} cron={self.cron!r} tz={self.tz}>"

    def inputs_for(self, occurrence: datetime) -> list[dict[str, Any]]:
        """The job inputs of one occurrence; raise ``X_JOB_INPUT_INVALID`` if ``input`` answers a non-dict."""
        if not callable(self.input):
            return [dict(self.input)]
        answer = self.input(occurrence)
        items = answer if isinstance(answer, list) else [answer]
        for item in items:
            if not isinstance(item, Mapping):
                raise JobsError(X_JOB_INPUT_INVALID, f"task {self.name!r}: input(occurrence) answered "
                                f"{answer!r}; it must answer a dict or a list of dicts.")
        return [dict(item) for item in items]

    def rows_for(self, occurrence: datetime, *, database: str | None = None) -> list[JobRow]:
        """Validated job rows for one occurrence, keyed ``"<task>:<occurrence epoch ms>:<job key>"``."""
        options = dataclasses.replace(self.job.using(database=database).options, enqueued_by=f"task:{self.name}",
                                      key_prefix=f"{self.name}:{occurrence_ms(occurrence)}:")
        return [options.row(self.job.render(values)) for values in self.inputs_for(occurrence)]

    def enqueue(self, *, occurrence: datetime | None = None,
                database: str | None = None) -> list[EnqueueResult]:
        """A manual run now, under the job's plain key (so it dedupes like any ``job.enqueue``): one
        result per input. A callable ``input`` is given ``occurrence`` (default: now)."""
        at = (occurrence or clock.now()).astimezone(UTC)
        return self.job.using(database=database).enqueue_many(self.inputs_for(at))

    def next_run(self, after: datetime) -> datetime:
        """The first occurrence strictly after ``after`` (aware), as an aware UTC datetime."""
        return self.schedule.next_after(after)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "cron": self.cron, "tz": self.tz, "job": self.job.name,
                "catch_up": self.catch_up, "max_catch_up": self.max_catch_up}


def task(*, name: str, cron: str, tz: str, job: AnyJobHandle, input: Input = None, catch_up: str = "skip",
         max_catch_up: int = 10) -> TaskHandle:
    """Declare a scheduled task; see the module docstring for every option and refusal."""
    caller = sys._getframe(1).f_globals.get("__name__", "?")
    handle = TaskHandle(name=name, cron=cron, tz=tz, job=job, input=input, catch_up=catch_up,
                        max_catch_up=max_catch_up, source=caller)
    with _registry_lock:
        existing = _registry.get(handle.name)
        if existing is not None and existing.source != handle.source:
            raise JobsError(X_TASK_DUPLICATE, f"Two tasks are declared on the name {handle.name!r} "
                            f"(in {existing.source} and {caller}).")
        _registry[handle.name] = handle
    return handle
