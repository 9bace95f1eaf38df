"""Internal: the lease statements on PostgreSQL: fleet concurrency slots and the scheduler's leader lease."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import LiteralString
from uuid import UUID

from psycopg.rows import kwargs_row

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.store import (
    LeaderLease,
)

LEASE_ACQUIRE: LiteralString = """
-- Take a free slot of a concurrency key for one job. Free: no row, an expired row (its worker
-- died), or this job's own leftover, which is preferred (a run never fails on its own slot).
-- The (concurrency_key, slot) primary key decides races: of two workers taking one slot, the loser's
-- conditional upsert answers no row.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
cand AS (
    SELECT s.slot FROM generate_series(0, %(limit)s - 1) AS s(slot), t
     WHERE NOT EXISTS (SELECT 1 FROM ultimate_jobs_joblease AS busy
                        WHERE busy.concurrency_key = %(key)s AND busy.slot = s.slot
                          AND busy.expires_at > t.now AND busy.job_id <> %(job_id)s)
     ORDER BY EXISTS (SELECT 1 FROM ultimate_jobs_joblease AS own
                       WHERE own.concurrency_key = %(key)s AND own.slot = s.slot AND own.job_id = %(job_id)s) DESC,
              s.slot
     LIMIT 1)
INSERT INTO ultimate_jobs_joblease AS l (concurrency_key, slot, holder, job_id, expires_at)
SELECT %(key)s, cand.slot, %(holder)s, %(job_id)s, t.now + %(ttl)s * interval '1 second' FROM cand, t
ON CONFLICT (concurrency_key, slot) DO UPDATE
   SET holder = excluded.holder, job_id = excluded.job_id, expires_at = excluded.expires_at
 WHERE l.expires_at <= excluded.expires_at - %(ttl)s * interval '1 second' OR l.job_id = excluded.job_id
RETURNING l.slot
"""

LEASE_RENEW: LiteralString = """
-- Renew this worker's held slots, fenced on holder, job and a lease that has not expired: a slot
-- missing from the answer was lost (expired and taken), and its run is cancelled.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_joblease AS l
   SET expires_at = t.now + %(ttl)s * interval '1 second'
  FROM t, unnest(%(key)b::text[], %(slot)b::int[], %(job_id)b::uuid[]) AS v(key, slot, job_id)
 WHERE l.concurrency_key = v.key AND l.slot = v.slot AND l.job_id = v.job_id AND l.holder = %(holder)s
   AND l.expires_at > t.now
RETURNING l.job_id
"""

LEASE_RELEASE: LiteralString = """
-- Hand one slot back, fenced on holder and job (a slot taken over after expiry is not ours).
DELETE FROM ultimate_jobs_joblease
 WHERE concurrency_key = %(key)s AND slot = %(slot)s AND holder = %(holder)s AND job_id = %(job_id)s
"""

LEADER_ATTEMPT_ELECT: LiteralString = """
-- Take the scheduler lease when it is free or lapsed, or renew it when this holder has it: one
-- upsert, decided on the database clock so a process with a skewed clock neither steals a live
-- lease nor keeps one past its expiry. `cur` is read before the upsert (same snapshot) so a
-- standby learns when the holder's lease ends; `t.now` is every process's shared "now".
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
cur AS (SELECT c.holder, c.expires_at, c.version FROM ultimate_jobs_schedulerleader AS c
         WHERE c.name = %(name)s),
up AS (
    INSERT INTO ultimate_jobs_schedulerleader AS l
           (name, holder, acquired_at, renewed_at, expires_at, version)
    SELECT %(name)s, %(holder)s, t.now, t.now, t.now + %(ttl)s * interval '1 second', 0 FROM t
    ON CONFLICT (name) DO UPDATE
       SET holder = excluded.holder,
           acquired_at = CASE WHEN l.holder = excluded.holder THEN l.acquired_at
                              ELSE excluded.acquired_at END,
           renewed_at = excluded.renewed_at, expires_at = excluded.expires_at
     WHERE l.holder = excluded.holder OR l.expires_at <= excluded.renewed_at
    RETURNING l.holder, l.expires_at, l.version)
SELECT t.now AS now, up.holder IS NOT NULL AS leading, coalesce(up.expires_at, cur.expires_at) AS expires_at,
       coalesce(up.holder, cur.holder) AS holder, coalesce(up.version, cur.version, 0) AS version
  FROM t LEFT JOIN up ON true LEFT JOIN cur ON true
"""

LEADER_RESIGN: LiteralString = """
-- Hand the lease back at once (after the last round finished), so a standby takes over now
-- rather than at expiry. Fenced on the holder: a lease already taken by another is not touched.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_schedulerleader AS l SET expires_at = t.now, renewed_at = t.now
  FROM t
 WHERE l.name = %(name)s AND l.holder = %(holder)s AND l.expires_at > t.now
RETURNING l.name
"""


class LeaseStatements(PostgresConnection):
    """The ``lease_*`` and ``leader_*`` methods."""

    def slot_acquire(self, *, key: str, limit: int, job_id: UUID, holder: str, ttl: float,
                      now: datetime | None) -> int | None:
        """A slot of ``key`` for ``job_id``, or ``None`` when all ``limit`` slots are held."""
        with self._cursor() as cursor:
            for _ in range(3):  # a lost race for one slot may leave another free
                cursor.execute(LEASE_ACQUIRE, {"key": key, "limit": limit, "job_id": job_id, "holder": holder,
                                               "ttl": ttl, "now": now})
                row = cursor.fetchone()
                if row is not None:
                    return int(row[0])
        return None

    def slot_renew(self, *, held: Sequence[tuple[str, int, UUID]], holder: str, ttl: float,
                    now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(LEASE_RENEW, {"key": [h[0] for h in held], "slot": [h[1] for h in held],
                                         "job_id": [h[2] for h in held], "holder": holder, "ttl": ttl, "now": now})
            return {row[0] for row in cursor.fetchall()}

    def slot_release(self, *, key: str, slot: int, job_id: UUID, holder: str) -> None:
        with self._cursor() as cursor:
            cursor.execute(LEASE_RELEASE, {"key": key, "slot": slot, "job_id": job_id, "holder": holder})

    def leader_attempt_elect(self, *, name: str, holder: str, ttl: float,
                             now: datetime | None) -> LeaderLease:
        with self._cursor(kwargs_row(LeaderLease)) as cursor:
            cursor.execute(LEADER_ATTEMPT_ELECT, {"name": name, "holder": holder, "ttl": ttl, "now": now})
            lease: LeaderLease = cursor.fetchone()
        return lease

    def leader_resign(self, *, name: str, holder: str, now: datetime | None) -> bool:
        with self._cursor() as cursor:
            cursor.execute(LEADER_RESIGN, {"name": name, "holder": holder, "now": now})
            return bool(cursor.fetchall())
