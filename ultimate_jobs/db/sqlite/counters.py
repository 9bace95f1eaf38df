"""Internal: the outcome counters' statements on SQLite: added inside the settling transaction,
folded into coarser tiers off the hot path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, LiteralString

from ultimate_jobs import clock
from ultimate_jobs.db.sqlite.connection import SqliteConnection, ts

COUNTER_ADD: LiteralString = """
-- Add to one outcome counter row (one tier's bucket, or the all-time row with width 0). Called
-- inside the settling transaction, so a count never disagrees with a settle that rolled back.
INSERT INTO ultimate_jobs_jobcounter (name, queue, outcome, width, bucket, shard, count)
VALUES (%s, %s, %s, %s, %s, 0, %s)
ON CONFLICT (name, queue, outcome, width, bucket, shard)
DO UPDATE SET count = ultimate_jobs_jobcounter.count + excluded.count
"""

_WIDTHS = (0, 60)  # the all-time row and the minute bucket; coarser tiers are folded later

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

COUNTER_FOLD_READ: LiteralString = """
-- The 1-minute counter buckets old enough to fold into the coarser tiers.
SELECT name, queue, outcome, bucket, shard, count FROM ultimate_jobs_jobcounter WHERE width = 60 AND bucket < %s
"""

COUNTER_FOLD_DELETE: LiteralString = """
-- Drop the minute buckets just folded (same transaction, one writer: each is folded once).
DELETE FROM ultimate_jobs_jobcounter WHERE width = 60 AND bucket < %s
"""

COUNTER_FOLD_ADD: LiteralString = """
-- Add folded minutes to one coarser bucket.
INSERT INTO ultimate_jobs_jobcounter (name, queue, outcome, width, bucket, shard, count)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (name, queue, outcome, width, bucket, shard)
DO UPDATE SET count = ultimate_jobs_jobcounter.count + excluded.count
"""


def _bucket(when: datetime, width: int) -> str | None:
    if width == 0:
        return ts(_EPOCH)
    epoch = int(when.timestamp())
    return ts(datetime.fromtimestamp(epoch - epoch % width, UTC))


def count_events(cursor: Any, events: Sequence[tuple[str, str, str]], when: datetime) -> None:
    """Add ``(name, queue, outcome)`` events to the minute bucket and the all-time row."""
    tally: dict[tuple[str, str, str], int] = {}
    for event in events:
        tally[event] = tally.get(event, 0) + 1
    for (name, queue, outcome), n in sorted(tally.items()):
        for width in _WIDTHS:
            cursor.execute(COUNTER_ADD, [name, queue, outcome, width, _bucket(when, width), n])


class CounterStatements(SqliteConnection):
    """``counter_add`` and ``counter_fold``."""

    def counter_fold(self, *, before: datetime) -> int:
        """Fold 1-minute counter buckets older than ``before`` into the coarser tiers; answer rows written."""
        tally: dict[tuple[Any, ...], int] = {}
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(COUNTER_FOLD_READ, [ts(before)])
            for name, queue, outcome, bucket, shard, count in cursor.fetchall():
                when = datetime.fromisoformat(bucket) if isinstance(bucket, str) else bucket
                when = when.replace(tzinfo=UTC) if when.tzinfo is None else when
                for width in (300, 3600):
                    key = (name, queue, outcome, width, _bucket(when, width), shard)
                    tally[key] = tally.get(key, 0) + count
            for key, count in sorted(tally.items()):
                cursor.execute(COUNTER_FOLD_ADD, [*key, count])
            cursor.execute(COUNTER_FOLD_DELETE, [ts(before)])
        return len(tally)

    def counter_add(self, *, events: Sequence[tuple[str, str, str]], now: datetime | None) -> None:
        """Count one ``(name, queue, outcome)`` event each (minute bucket and all-time row)."""
        if not events:
            return
        with self._atomic(), self._cursor() as cursor:
            count_events(cursor, events, now or clock.now())
