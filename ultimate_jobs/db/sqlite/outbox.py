"""Internal: the transactional outbox's statements on SQLite: stage, claim, mark, release, purge."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString
from uuid import UUID

from ultimate_jobs import clock
from ultimate_jobs.db.sqlite.connection import SqliteConnection, as_uuid, aware, named_rows, ts
from ultimate_jobs.db.store import (
    JobRow,
)

OUTBOX_STAGE_ROW: LiteralString = "(%s, NULL, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"

OUTBOX_STAGE_MANY: LiteralString = """
-- Stage validated enqueues in the caller's transaction: its commit is the enqueue, its rollback
-- means the job never existed. run_at is fixed here, so a delay counts from the enqueue. txid
-- stays NULL: SQLite names no transaction, so all rows form one group, published in one order.
INSERT INTO ultimate_jobs_outboxentry (
    id, txid, staged_at, run_id, name, queue, priority, payload, idempotency_key, tenant_id,
    enqueued_by, max_attempts, run_at, concurrency_key, traceparent, sensitive)
VALUES {rows}
"""

OUTBOX_CLAIM: LiteralString = """
-- Claim up to the limit of committed rows as a lease, in one statement (SQLite's one writer makes
-- it atomic, and a later claim sees this one committed). A row is claimable when unpublished and
-- unclaimed or its lease lapsed, and only while no earlier row of its group is held: rows never
-- overtake each other. RETURNING has no row order; the caller sorts by (staged_at, id).
UPDATE ultimate_jobs_outboxentry
   SET claimed_at = %s, claimed_by = %s
 WHERE id IN (
    SELECT o.id FROM ultimate_jobs_outboxentry AS o
     WHERE o.published_at IS NULL AND (o.claimed_at IS NULL OR o.claimed_at <= %s)
       AND NOT EXISTS (
           SELECT 1 FROM ultimate_jobs_outboxentry AS h
            WHERE h.txid IS o.txid AND h.published_at IS NULL AND h.claimed_at IS NOT NULL
              AND h.claimed_at > %s AND (h.staged_at, h.id) < (o.staged_at, o.id))
     ORDER BY o.staged_at, o.id
     LIMIT %s)
RETURNING id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by, max_attempts,
          run_at, concurrency_key, traceparent, sensitive, staged_at
"""

OUTBOX_MARK_PUBLISHED: LiteralString = """
-- Record that each row was published and which job it became, in the relay's publish
-- transaction; fenced on claimed_by (a relay past its lease owns nothing) and on
-- published_at IS NULL (first writer wins).
WITH v(id, job_id) AS (VALUES {rows})
UPDATE ultimate_jobs_outboxentry
   SET published_at = %s, job_id = v.job_id
  FROM v
 WHERE ultimate_jobs_outboxentry.id = v.id AND claimed_by = %s AND published_at IS NULL
RETURNING ultimate_jobs_outboxentry.id
"""

OUTBOX_RELEASE: LiteralString = """
-- Hand back claimed rows a failed publish stopped; fenced like the mark, so a late release never
-- unclaims rows another relay holds.
UPDATE ultimate_jobs_outboxentry
   SET claimed_at = NULL, claimed_by = NULL
 WHERE id IN ({ids}) AND claimed_by = %s AND published_at IS NULL
RETURNING id
"""

OUTBOX_PURGE: LiteralString = """
-- Delete up to the limit of rows published longer than OUTBOX_RETENTION ago, oldest first.
DELETE FROM ultimate_jobs_outboxentry
 WHERE id IN (SELECT id FROM ultimate_jobs_outboxentry WHERE published_at < %s ORDER BY published_at LIMIT %s)
"""


class OutboxStatements(SqliteConnection):
    """The ``outbox_*`` methods."""

    def outbox_stage_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                          notify: Sequence[str] = ()) -> None:
        """Stage ``rows`` in the connection's current transaction: one statement (SQLite has no NOTIFY)."""
        when = now or clock.now()
        stamp = ts(when)
        params: list[Any] = []
        for r in rows:
            run_at = r.run_at if r.run_at is not None else when + timedelta(seconds=r.delay)
            params += [r.id.hex, stamp, r.run_id.hex, r.name, r.queue, r.priority, r.payload,
                       r.idempotency_key, r.tenant_id, r.enqueued_by, r.max_attempts, ts(run_at),
                       r.concurrency_key, r.traceparent, r.sensitive]
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_STAGE_MANY.format(rows=", ".join([OUTBOX_STAGE_ROW] * len(rows))), params)

    def outbox_claim(self, *, relay_id: str, limit: int, lease: float,
                     now: datetime | None) -> list[JobRow]:
        when = now or clock.now()
        lapsed = ts(when - timedelta(seconds=lease))
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_CLAIM, [ts(when), relay_id, lapsed, lapsed, limit])
            rows = named_rows(cursor)
        rows.sort(key=lambda r: (r.pop("staged_at"), r["id"]))  # the text forms sort like the values
        return [JobRow(**{**r, "id": as_uuid(r["id"]), "run_id": as_uuid(r["run_id"]), "run_at": aware(r["run_at"]),
                          "sensitive": bool(r["sensitive"])}, delay=0.0) for r in rows]

    def outbox_mark_published(self, *, published: Sequence[tuple[UUID, UUID]], relay_id: str,
                              now: datetime | None) -> set[UUID]:
        if not published:
            return set()
        params: list[Any] = []
        for outbox_id, job_id in published:
            params += [outbox_id.hex, job_id.hex]
        sql = OUTBOX_MARK_PUBLISHED.format(rows=", ".join(["(%s, %s)"] * len(published)))
        with self._cursor() as cursor:
            cursor.execute(sql, [*params, ts(now or clock.now()), relay_id])
            return {as_uuid(row[0]) for row in cursor.fetchall()}

    def outbox_release(self, *, ids: Sequence[UUID], relay_id: str) -> set[UUID]:
        if not ids:
            return set()
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_RELEASE.format(ids=", ".join(["%s"] * len(ids))),
                           [i.hex for i in ids] + [relay_id])
            return {as_uuid(row[0]) for row in cursor.fetchall()}

    def outbox_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_PURGE, [ts((now or clock.now()) - timedelta(seconds=retention)), limit])
            return int(cursor.rowcount)
