"""Internal: the lease statements on SQLite: fleet concurrency slots and the scheduler's leader lease."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import LiteralString
from uuid import UUID

from ultimate_jobs import clock
from ultimate_jobs.db.sqlite.connection import SqliteConnection, as_uuid, parse_ts, text_ts, ts
from ultimate_jobs.db.store import (
    LeaderLease,
)

LEASE_READ: LiteralString = """
-- The slots of one concurrency key, to pick a free one (one writer: nobody takes it meanwhile).
SELECT slot, job_id, expires_at FROM ultimate_jobs_joblease WHERE concurrency_key = %s
"""

LEASE_TAKE: LiteralString = """
-- Take one slot: insert it, or take over an expired row or this job's own leftover.
INSERT INTO ultimate_jobs_joblease (concurrency_key, slot, holder, job_id, expires_at) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (concurrency_key, slot) DO UPDATE
   SET holder = excluded.holder, job_id = excluded.job_id, expires_at = excluded.expires_at
 WHERE ultimate_jobs_joblease.expires_at <= %s OR ultimate_jobs_joblease.job_id = excluded.job_id
"""

LEASE_RENEW: LiteralString = """
-- Renew one held slot, fenced on holder, job and a lease that has not expired.
UPDATE ultimate_jobs_joblease SET expires_at = %s
 WHERE concurrency_key = %s AND slot = %s AND job_id = %s AND holder = %s AND expires_at > %s
"""

LEASE_RELEASE: LiteralString = """
-- Hand one slot back, fenced on holder and job.
DELETE FROM ultimate_jobs_joblease WHERE concurrency_key = %s AND slot = %s AND holder = %s AND job_id = %s
"""

LEADER_ATTEMPT_ELECT: LiteralString = """
-- Take the scheduler lease when it is free or lapsed, or renew it when this holder has it: one
-- upsert. A refused upsert returns no row.
INSERT INTO ultimate_jobs_schedulerleader (name, holder, acquired_at, renewed_at, expires_at, version)
VALUES (%s, %s, %s, %s, %s, 0)
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder,
       acquired_at = CASE WHEN holder = excluded.holder THEN acquired_at ELSE excluded.acquired_at END,
       renewed_at = excluded.renewed_at, expires_at = excluded.expires_at
 WHERE holder = excluded.holder OR expires_at <= excluded.renewed_at
RETURNING holder, expires_at, version
"""

LEADER_READ: LiteralString = """
-- Who holds the lease and until when, for a standby that lost the election.
SELECT holder, expires_at, version FROM ultimate_jobs_schedulerleader WHERE name = %s
"""

LEADER_RESIGN: LiteralString = """
-- Hand the lease back at once, fenced on the holder.
UPDATE ultimate_jobs_schedulerleader SET expires_at = %s, renewed_at = %s
 WHERE name = %s AND holder = %s AND expires_at > %s
"""


class LeaseStatements(SqliteConnection):
    """The ``lease_*`` and ``leader_*`` methods."""

    def slot_acquire(self, *, key: str, limit: int, job_id: UUID, holder: str, ttl: float,
                      now: datetime | None) -> int | None:
        when = now or clock.now()
        stamp = ts(when)
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(LEASE_READ, [key])
            busy, own = set(), None
            for slot, holder_job, expires_at in cursor.fetchall():
                if as_uuid(holder_job) == job_id:
                    own = slot
                elif text_ts(expires_at) > stamp:
                    busy.add(slot)
            free = [s for s in range(limit) if s not in busy]
            if own is not None and own < limit:
                free.insert(0, own)
            if not free:
                return None
            cursor.execute(LEASE_TAKE, [key, free[0], holder, job_id.hex, ts(when + timedelta(seconds=ttl)), stamp])
            return int(free[0]) if cursor.rowcount == 1 else None

    def slot_renew(self, *, held: Sequence[tuple[str, int, UUID]], holder: str, ttl: float,
                    now: datetime | None) -> set[UUID]:
        when = now or clock.now()
        renewed: set[UUID] = set()
        with self._atomic(), self._cursor() as cursor:
            for key, slot, job_id in held:
                cursor.execute(LEASE_RENEW, [ts(when + timedelta(seconds=ttl)), key, slot, job_id.hex, holder,
                                             ts(when)])
                if cursor.rowcount == 1:
                    renewed.add(job_id)
        return renewed

    def slot_release(self, *, key: str, slot: int, job_id: UUID, holder: str) -> None:
        with self._cursor() as cursor:
            cursor.execute(LEASE_RELEASE, [key, slot, holder, job_id.hex])

    def leader_attempt_elect(self, *, name: str, holder: str, ttl: float,
                             now: datetime | None) -> LeaderLease:
        when = now or clock.now()
        stamp = ts(when)
        with self._cursor() as cursor:  # one statement: no transaction to open around it
            cursor.execute(LEADER_ATTEMPT_ELECT, [name, holder, stamp, stamp,
                                                  ts(when + timedelta(seconds=ttl))])
            row = cursor.fetchone()
            leading = row is not None
            if row is None:
                cursor.execute(LEADER_READ, [name])
                row = cursor.fetchone()
        current, expires_at, version = row if row is not None else (None, None, 0)
        return LeaderLease(leading=leading, now=when, expires_at=parse_ts(expires_at), holder=current,
                           version=int(version))

    def leader_resign(self, *, name: str, holder: str, now: datetime | None) -> bool:
        stamp = ts(now or clock.now())
        with self._cursor() as cursor:
            cursor.execute(LEADER_RESIGN, [stamp, stamp, name, holder, stamp])
            return bool(cursor.rowcount == 1)
