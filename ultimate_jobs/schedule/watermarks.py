"""Internal: the per-task scheduler state rows (``SchedulerState``), through the ORM.

The watermark is the newest occurrence a task is done with. It moves only by ``advance()``,
a compare-and-set on the value the caller read, inside the transaction that writes the
occurrence's jobs: of two schedulers that both believe they lead, one update matches and the
other matches nothing and rolls its jobs back. The job key alone would not do it, because it
dedupes only while the first job is live. A paused row never advances, so pausing needs no
coordination with a round in flight.

Logged events: ``jobs.scheduler.armed``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F

from ultimate_jobs.models import SchedulerLeader, SchedulerState

log = logging.getLogger("ultimate_jobs")


@dataclass(slots=True)
class TaskState:
    """What a leader holds in memory per task between rounds."""

    name: str
    watermark: datetime | None
    paused: bool


def _states(alias: str) -> Any:
    return SchedulerState.objects.using(alias)


def read(alias: str, names: Sequence[str]) -> dict[str, TaskState]:
    rows = _states(alias).filter(name__in=list(names)).values_list("name", "watermark", "paused")
    return {name: TaskState(name, watermark, paused) for name, watermark, paused in rows}


def load(alias: str, names: Sequence[str], *, arm_at: datetime) -> dict[str, TaskState]:
    """The state of each task, arming the ones no scheduler has seen at ``arm_at`` (fires nothing:
    "missed" is only defined after a watermark exists)."""
    found = read(alias, names)
    missing = [n for n in names if n not in found]
    unarmed = [n for n, state in found.items() if state.watermark is None]  # paused before any scheduler ran
    if not missing and not unarmed:
        return found
    with transaction.atomic(using=alias):
        _states(alias).bulk_create(
            [SchedulerState(name=n, watermark=arm_at, armed_at=arm_at, updated_at=arm_at) for n in missing],
            ignore_conflicts=True)
        if unarmed:
            _states(alias).filter(name__in=unarmed, watermark__isnull=True).update(
                watermark=arm_at, armed_at=arm_at, updated_at=arm_at)
    for name in [*missing, *unarmed]:
        log.info("jobs.scheduler.armed task=%s watermark=%s", name, arm_at.isoformat())
    return read(alias, names)


def advance(alias: str, name: str, *, expected: datetime | None, watermark: datetime, occurrence: datetime,
            fired: int, now: datetime) -> bool:
    """Move the watermark from ``expected`` to ``watermark``; answer False when another scheduler
    moved it first or the task was paused. Call inside the transaction that writes the jobs."""
    updated = _states(alias).filter(name=name, watermark=expected, paused=False).update(
        watermark=watermark, last_occurrence=occurrence, last_fired_at=now, fires=F("fires") + fired,
        updated_at=now)
    return bool(updated == 1)


def set_paused(alias: str, name: str, *, paused: bool, now: datetime) -> None:
    """Pause or resume one task, and bump every leader's ``version`` so the one leading reloads."""
    with transaction.atomic(using=alias):
        changes: dict[str, Any] = {"paused": paused, "paused_at": now if paused else None, "updated_at": now}
        if not _states(alias).filter(name=name).update(**changes):
            _states(alias).bulk_create([SchedulerState(name=name, **changes)], ignore_conflicts=True)
            _states(alias).filter(name=name).update(**changes)
        SchedulerLeader.objects.using(alias).update(version=F("version") + 1)


def rows(alias: str, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The full state rows of ``names`` (for the operator API)."""
    fields = ("name", "watermark", "paused", "paused_at", "last_occurrence", "last_fired_at", "fires",
              "armed_at")
    return {row["name"]: row for row in _states(alias).filter(name__in=list(names)).values(*fields)}
