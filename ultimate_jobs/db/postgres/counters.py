"""Internal: the outcome counters' statements on PostgreSQL: added in the settle's statement, folded
into coarser tiers off the hot path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import LiteralString

from ultimate_jobs.db.postgres.connection import PostgresConnection

_COUNT_SETTLED: LiteralString = """
    -- Add the settled rows to the outcome counters: the 1-minute bucket and the all-time row
    -- (width 0); coarser tiers are folded from minute rows later (COUNTER_FOLD), off the hot path.
    -- Grouped so no key appears twice in one insert, and ordered so two workers lock counter rows
    -- in the same order (no deadlock); the shard (this backend's pid) spreads one hot key over 16
    -- rows so concurrent settles do not queue on one row lock.
    INSERT INTO ultimate_jobs_jobcounter AS c (name, queue, outcome, width, bucket, shard, count)
    SELECT s.name, s.queue, s.outcome, w.width,
           CASE WHEN w.width = 0 THEN timestamptz 'epoch'
                ELSE date_bin(w.width * interval '1 second', t.now, timestamptz 'epoch') END,
           pg_backend_pid() %% 16, count(*)
      FROM settled AS s, t, (VALUES (0), (60)) AS w(width)
     GROUP BY 1, 2, 3, 4, 5, 6
     ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (name, queue, outcome, width, bucket, shard) DO UPDATE SET count = c.count + excluded.count
"""

COUNTER_ADD: LiteralString = """
-- Add one event per (name, queue, outcome) to the counters outside a settle: an operator's
-- cancel, a worker's lost lease.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
settled AS (SELECT e.name, e.queue, e.outcome
                FROM unnest(%(name)b::text[], %(queue)b::text[], %(outcome)b::text[]) AS e(name, queue, outcome)),
counted AS (""" + _COUNT_SETTLED + """)
SELECT count(*) FROM settled
"""

COUNTER_FOLD: LiteralString = """
-- Move 1-minute buckets older than %(before)s into the 5-minute and 1-hour tiers. The DELETE
-- takes each minute row exactly once even when two workers fold at the same moment (the second
-- finds the rows gone), and the tiers receive what it took in the same statement.
WITH moved AS (
    DELETE FROM ultimate_jobs_jobcounter AS m
     WHERE m.width = 60 AND m.bucket < %(before)s
    RETURNING m.name, m.queue, m.outcome, m.bucket, m.shard, m.count),
tiers AS (
    SELECT mv.name, mv.queue, mv.outcome, w.width,
           date_bin(w.width * interval '1 second', mv.bucket, timestamptz 'epoch') AS bucket, mv.shard,
           sum(mv.count) AS count
      FROM moved AS mv, (VALUES (300), (3600)) AS w(width)
     GROUP BY 1, 2, 3, 4, 5, 6)
INSERT INTO ultimate_jobs_jobcounter AS c (name, queue, outcome, width, bucket, shard, count)
SELECT tiers.name, tiers.queue, tiers.outcome, tiers.width, tiers.bucket, tiers.shard, tiers.count
  FROM tiers ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (name, queue, outcome, width, bucket, shard) DO UPDATE SET count = c.count + excluded.count
"""


class CounterStatements(PostgresConnection):
    """``counter_add`` and ``counter_fold``."""

    def counter_fold(self, *, before: datetime) -> int:
        """Fold 1-minute counter buckets older than ``before`` into the coarser tiers; answer rows written."""
        with self._cursor() as cursor:
            cursor.execute(COUNTER_FOLD, {"before": before})
            return int(cursor.rowcount)

    def counter_add(self, *, events: Sequence[tuple[str, str, str]], now: datetime | None) -> None:
        """Count one ``(name, queue, outcome)`` event each (minute bucket and all-time row)."""
        if not events:
            return
        with self._cursor() as cursor:
            cursor.execute(COUNTER_ADD, {"name": [e[0] for e in events], "queue": [e[1] for e in events],
                                         "outcome": [e[2] for e in events], "now": now})
