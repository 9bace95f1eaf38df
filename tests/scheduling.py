"""Helpers for the scheduler tests: throwaway task declarations, a frozen clock, state rows.

A pytest plugin (``pytest_plugins`` in conftest.py): the fixtures live here so the scheduler
suite stays in its own files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from ultimate_jobs import clock
from ultimate_jobs.schedule.declarations import TaskHandle, _unregister, task


@pytest.fixture
def declare_task() -> Iterator[Callable[..., TaskHandle]]:
    """``declare_task(**task_options)``: a task that exists for one test only."""
    names: list[str] = []

    def make(**options: object) -> TaskHandle:
        handle = task(**options)  # type: ignore[arg-type]
        names.append(handle.name)
        return handle

    yield make
    for name in names:
        _unregister(name)


@pytest.fixture
def frozen_at() -> Iterator[Callable[[datetime], datetime]]:
    """``frozen_at(when)`` freezes ultimate_jobs' clock (and every SQL ``now``) at ``when``."""

    def freeze(when: datetime) -> datetime:
        clock.freeze(when)
        return when

    yield freeze
    clock.freeze(None)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def set_watermark(name: str, at: datetime) -> None:
    """Put a task's watermark at ``at`` (a simulated outage since then), creating the row."""
    from ultimate_jobs.models import SchedulerState

    SchedulerState.objects.update_or_create(name=name,
                                            defaults={"watermark": at, "armed_at": at, "updated_at": at})


def task_jobs(name: str) -> list[tuple[str, str]]:
    """The jobs a task fired, as (idempotency_key, state), oldest first."""
    from ultimate_jobs.models import Job

    return list(Job.objects.filter(idempotency_key__startswith=f"{name}:").order_by("created_at", "id")
                .values_list("idempotency_key", "state"))
