"""Internal: the hourly housekeeping of a worker's presence beat: fold and expire ``JobCounter`` buckets.

Minute buckets older than 24 h fold into 5-minute (kept 7 days) and 1-hour (kept 30 days)
buckets, each count moved exactly once (``Store.counter_fold``); coarse buckets past their
tier's retention are deleted. The all-time rows stay. ``ops.counters`` reads what is left.

Logged events: ``jobs.counters.pruned``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from ultimate_jobs import clock
from ultimate_jobs.conf import get_settings
from ultimate_jobs.db import store_for
from ultimate_jobs.models import JobCounter
from ultimate_jobs.models.operations import COUNTER_TIERS

log = logging.getLogger("ultimate_jobs")


def floor_bucket(when: datetime, width: int) -> datetime:
    """The start of the ``width``-second bucket holding ``when``."""
    stamp = when.timestamp()
    return datetime.fromtimestamp(stamp - stamp % width, UTC)


def prune_counters(now: datetime | None = None, *, database: str | None = None) -> int:
    """Fold minute buckets past 24 h into the coarser tiers, then delete coarse buckets past their
    retention; answer how many coarse rows were deleted. The all-time rows stay."""
    alias = database or get_settings().DATABASE
    now = now or clock.now()
    # Fold whole hours only, so the hour being folded is never split between minute and hour rows.
    store_for(alias).counter_fold(before=floor_bucket(now - timedelta(seconds=COUNTER_TIERS[0][1]), 3600))
    removed = 0
    for width, kept in COUNTER_TIERS[1:]:
        expired = JobCounter.objects.using(alias).filter(width=width, bucket__lt=now - timedelta(seconds=kept))
        deleted, _ = expired.delete()
        removed += deleted
    if removed:
        log.info("jobs.counters.pruned rows=%s", removed)
    return removed
