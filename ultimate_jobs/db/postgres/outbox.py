"""Internal: the transactional outbox's statements on PostgreSQL: stage, claim, mark, release, purge."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString
from uuid import UUID

from psycopg.rows import kwargs_row

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.postgres.inserts import _JOB_ROWS_ARRAYS, row_columns, row_params
from ultimate_jobs.db.store import (
    OUTBOX_CHANNEL,
    JobRow,
)

OUTBOX_STAGE_MANY: LiteralString = """
-- Stage validated enqueues in the caller's transaction: its commit is the enqueue, its rollback
-- means the job never existed. run_at is fixed here, so a delay counts from the enqueue, not from
-- the publish. txid groups this transaction's rows, which the relay publishes in (staged_at, id)
-- order; within one transaction staged_at is one value (now() is the transaction's start) and
-- the UUIDv7 id is the staging order. The notify reaches an idle relay at commit, never on rollback.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now, pg_current_xact_id()::text::bigint AS txid),
staged AS (
    INSERT INTO ultimate_jobs_outboxentry (
        id, txid, staged_at, run_id, name, queue, priority, payload, idempotency_key, tenant_id,
        enqueued_by, max_attempts, run_at, concurrency_key, traceparent, sensitive)
    SELECT v.id, t.txid, t.now, v.run_id, v.name, v.queue, v.priority, v.payload, v.idempotency_key,
           v.tenant_id, v.enqueued_by, v.max_attempts,
           coalesce(v.run_at, t.now + v.delay * interval '1 second'), v.concurrency_key, v.traceparent,
           v.sensitive
      FROM t, """ + _JOB_ROWS_ARRAYS + """)
SELECT count(pg_notify('""" + OUTBOX_CHANNEL + """', q.queue)) FROM unnest(%(notify)b::text[]) AS q(queue)
"""

OUTBOX_STAGE_ONE: LiteralString = """
-- The one-row form of OUTBOX_STAGE_MANY (a single enqueue inside a transaction): no arrays to
-- build and unpack on the hot path.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now, pg_current_xact_id()::text::bigint AS txid),
staged AS (
    INSERT INTO ultimate_jobs_outboxentry (
        id, txid, staged_at, run_id, name, queue, priority, payload, idempotency_key, tenant_id,
        enqueued_by, max_attempts, run_at, concurrency_key, traceparent, sensitive)
    SELECT %(id)s, t.txid, t.now, %(run_id)s, %(name)s, %(queue)s, %(priority)s, %(payload)s,
           %(idempotency_key)s, %(tenant_id)s, %(enqueued_by)s, %(max_attempts)s,
           coalesce(%(run_at)s::timestamptz, t.now + %(delay)s * interval '1 second'), %(concurrency_key)s,
           %(traceparent)s, %(sensitive)s
      FROM t)
SELECT count(pg_notify('""" + OUTBOX_CHANNEL + """', %(queue)s)) FROM t WHERE %(notify)s
"""

OUTBOX_CLAIM: LiteralString = """
-- Claim up to %(limit)s committed rows as a lease: one statement locks them and stamps
-- claimed_at/claimed_by, so two relays can never hold one row inside its lease (a bare
-- SELECT ... FOR UPDATE under autocommit would drop its locks before the relay used them).
-- A row is claimable when unpublished and unclaimed or its lease lapsed (its relay died), and
-- only while no earlier row of its staging transaction (txid) is held: rows of one transaction
-- never overtake each other. The held check sees committed claims only, and SKIP LOCKED passes
-- over a concurrent claim's rows silently, so `kept` compares each transaction's candidates with
-- its first unpublished rows read from the index, position by position, and keeps the run that
-- matches from the start. Each step is MATERIALIZED and works on arrays, and the UPDATE finds
-- its rows by primary key: on a table without statistics yet the planner would otherwise re-run
-- a join per candidate (seconds, not ms), and with them hash the whole table, published rows
-- kept for OUTBOX_RETENTION included.
-- The outer ORDER BY is load-bearing: UPDATE ... RETURNING has no row order, and the relay
-- publishes in the order it is handed rows.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
l AS (SELECT t.now, t.now - %(lease)s * interval '1 second' AS lapsed FROM t),
candidate AS (
    SELECT o.id, o.txid, o.staged_at FROM ultimate_jobs_outboxentry AS o, l
     WHERE o.published_at IS NULL AND (o.claimed_at IS NULL OR o.claimed_at <= l.lapsed)
       AND NOT EXISTS (
           SELECT 1 FROM ultimate_jobs_outboxentry AS h
            WHERE h.txid = o.txid AND h.published_at IS NULL AND h.claimed_at IS NOT NULL
              AND h.claimed_at > l.lapsed AND (h.staged_at, h.id) < (o.staged_at, o.id))
     ORDER BY o.staged_at, o.id
     LIMIT %(limit)s
       FOR UPDATE OF o SKIP LOCKED),
grouped AS MATERIALIZED (
    SELECT c.txid, array_agg(c.id ORDER BY c.staged_at, c.id) AS ids FROM candidate AS c GROUP BY c.txid),
kept AS MATERIALIZED (
    SELECT z.id, bool_and(coalesce(z.id = z.head, false)) OVER (PARTITION BY g.txid ORDER BY z.n) AS ok
      FROM grouped AS g
     CROSS JOIN LATERAL unnest(g.ids, CASE WHEN g.txid IS NULL THEN g.ids ELSE ARRAY(
               SELECT u.id FROM ultimate_jobs_outboxentry AS u
                WHERE u.txid = g.txid AND u.published_at IS NULL
                ORDER BY u.staged_at, u.id
                LIMIT cardinality(g.ids)) END) WITH ORDINALITY AS z(id, head, n)),
claimed AS (
    UPDATE ultimate_jobs_outboxentry AS o
       SET claimed_at = l.now, claimed_by = %(relay_id)s
      FROM l
     WHERE o.id = ANY(ARRAY(SELECT kept.id FROM kept WHERE kept.ok))
    RETURNING o.id, o.run_id, o.name, o.queue, o.priority, o.payload, o.idempotency_key, o.tenant_id,
              o.enqueued_by, o.max_attempts, o.run_at, o.concurrency_key, o.traceparent, o.sensitive, o.staged_at)
SELECT id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by, max_attempts,
       run_at, concurrency_key, traceparent, sensitive
  FROM claimed
 ORDER BY staged_at, id
"""

OUTBOX_MARK_PUBLISHED: LiteralString = """
-- Record that each row was published and which job it became, in the relay's publish
-- transaction. Fenced on claimed_by (a relay that stalled past its lease owns nothing: its late
-- mark must not retire a row another relay is publishing) and on published_at IS NULL
-- (first writer wins). The relay compares the answer with its batch before it commits.
-- A row became its own job unless it deduplicated into a live one: only those few pairs are
-- sent, so the statement is a primary-key lookup per row and no join the planner could
-- misjudge (a row estimate of 1 for claimed_by made it loop over the batch once per row).
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_outboxentry AS o
   SET published_at = t.now,
       job_id = coalesce((%(deduped_job_id)b::uuid[])[array_position(%(deduped_id)b::uuid[], o.id)], o.id)
  FROM t
 WHERE o.id = ANY(%(id)b::uuid[]) AND o.claimed_by = %(relay_id)s AND o.published_at IS NULL
RETURNING o.id
"""

OUTBOX_RELEASE: LiteralString = """
-- Hand back claimed rows a failed publish stopped, so they are retried on the next pass rather
-- than after a whole lease. Fenced like the mark: a late release must not unclaim rows another
-- relay holds (a third relay would publish them again).
UPDATE ultimate_jobs_outboxentry
   SET claimed_at = NULL, claimed_by = NULL
 WHERE id = ANY(%(id)b::uuid[]) AND claimed_by = %(relay_id)s AND published_at IS NULL
RETURNING id
"""

OUTBOX_PURGE: LiteralString = """
-- Delete up to %(limit)s rows published longer than OUTBOX_RETENTION ago, oldest first.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
old AS (
    SELECT o.id FROM ultimate_jobs_outboxentry AS o, t
     WHERE o.published_at < t.now - %(retention)s * interval '1 second'
     ORDER BY o.published_at
     LIMIT %(limit)s
       FOR UPDATE OF o SKIP LOCKED)
DELETE FROM ultimate_jobs_outboxentry AS d USING old WHERE d.id = old.id
"""


def _staged_row(**columns: Any) -> JobRow:
    """A claimed outbox row as the JobRow it was staged as: its ids, ``run_at`` fixed, no delay."""
    return JobRow(delay=0.0, **columns)

_STAGED = kwargs_row(_staged_row)


class OutboxStatements(PostgresConnection):
    """The ``outbox_*`` methods."""

    def outbox_stage_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                          notify: Sequence[str] = ()) -> None:
        """Stage ``rows`` in the connection's current transaction: one statement."""
        with self._cursor() as cursor:
            if len(rows) == 1:
                cursor.execute(OUTBOX_STAGE_ONE, {**row_params(rows[0]), "now": now,
                                                  "notify": rows[0].queue in notify})
            else:
                cursor.execute(OUTBOX_STAGE_MANY, {**row_columns(rows), "now": now, "notify": list(notify)})

    def outbox_claim(self, *, relay_id: str, limit: int, lease: float,
                     now: datetime | None) -> list[JobRow]:
        with self._cursor(_STAGED) as cursor:
            cursor.execute(OUTBOX_CLAIM, {"relay_id": relay_id, "limit": limit, "lease": lease, "now": now})
            return list(cursor.fetchall())

    def outbox_mark_published(self, *, published: Sequence[tuple[UUID, UUID]], relay_id: str,
                              now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            deduped = [(outbox_id, job_id) for outbox_id, job_id in published if job_id != outbox_id]
            cursor.execute(OUTBOX_MARK_PUBLISHED, {"id": [p[0] for p in published],
                                                   "deduped_id": [d[0] for d in deduped],
                                                   "deduped_job_id": [d[1] for d in deduped],
                                                   "relay_id": relay_id, "now": now})
            return {row[0] for row in cursor.fetchall()}

    def outbox_release(self, *, ids: Sequence[UUID], relay_id: str) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_RELEASE, {"id": list(ids), "relay_id": relay_id})
            return {row[0] for row in cursor.fetchall()}

    def outbox_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_PURGE, {"retention": retention, "now": now, "limit": limit})
            return int(cursor.rowcount)
