"""Internal: the PostgreSQL store: every raw statement ultimate_jobs sends to PostgreSQL.

Raw SQL only where the ORM cannot say it: the claim CTE with ``FOR UPDATE SKIP LOCKED``,
``ON CONFLICT`` on the live-key index expression, batched settles over ``unnest`` arrays and
``LISTEN/NOTIFY``. Each constant carries its method's name. Every deadline is computed from
``coalesce(%(now)s, now())``: NULL in production, so the database clock decides. Arrays are
sent in binary (``%(name)b``): no text quoting of thousands of elements.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString
from uuid import UUID

from .store import ClaimedJob, OutboxRow, Settlement

if TYPE_CHECKING:
    from ..enqueue import JobRow

CHANNEL = "ultimate_jobs"
OUTBOX_CHANNEL = "ultimate_jobs_outbox"  # relays listen here; workers never wake for a staged row

JOB_INSERT_MANY: LiteralString = """
-- Insert validated rows; a row whose live key is held already is skipped: that is the dedupe.
-- The conflict target repeats the live-key index exactly (expressions and predicate), and the
-- notify CTE wakes idle workers once per named queue, at commit (NOTIFY is transactional).
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
ins AS (
    INSERT INTO ultimate_jobs_job AS j (
        id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, enqueued_by,
        attempt, max_attempts, run_at, concurrency_key, traceparent, created_at, updated_at)
    SELECT v.id, v.run_id, v.name, v.queue, v.priority,
           CASE WHEN coalesce(v.run_at, t.now + v.delay * interval '1 second') > t.now
                THEN 'delayed' ELSE 'ready' END,
           v.payload::jsonb, v.idempotency_key, v.tenant_id, v.enqueued_by, 0, v.max_attempts,
           coalesce(v.run_at, t.now + v.delay * interval '1 second'), v.concurrency_key, v.traceparent,
           t.now, t.now
      FROM t, unnest(%(id)b::uuid[], %(run_id)b::uuid[], %(name)b::text[], %(queue)b::text[],
                     %(priority)b::int[], %(payload)b::text[], %(idempotency_key)b::text[],
                     %(tenant_id)b::text[], %(enqueued_by)b::text[], %(max_attempts)b::int[],
                     %(delay)b::float8[], %(run_at)b::timestamptz[], %(concurrency_key)b::text[],
                     %(traceparent)b::text[])
           AS v(id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by,
                max_attempts, delay, run_at, concurrency_key, traceparent)
    ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key)
       WHERE state IN ('ready', 'delayed', 'running', 'suspended') DO NOTHING
    RETURNING j.id, j.queue),
woken AS (SELECT pg_notify('ultimate_jobs', q.queue) FROM (SELECT DISTINCT queue FROM ins) AS q
           WHERE q.queue = ANY(%(notify)b::text[]))
SELECT ins.id, (SELECT count(*) FROM woken) FROM ins
"""

JOB_INSERT_ONE: LiteralString = """
-- The one-row form of JOB_INSERT_MANY (a single enqueue): the same conflict target, no arrays
-- to build and unpack on the hot path.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
ins AS (
    INSERT INTO ultimate_jobs_job AS j (
        id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, enqueued_by,
        attempt, max_attempts, run_at, concurrency_key, traceparent, created_at, updated_at)
    SELECT %(id)s, %(run_id)s, %(name)s, %(queue)s, %(priority)s,
           CASE WHEN coalesce(%(run_at)s::timestamptz, t.now + %(delay)s * interval '1 second') > t.now
                THEN 'delayed' ELSE 'ready' END,
           %(payload)s::jsonb, %(idempotency_key)s, %(tenant_id)s, %(enqueued_by)s, 0, %(max_attempts)s,
           coalesce(%(run_at)s::timestamptz, t.now + %(delay)s * interval '1 second'), %(concurrency_key)s,
           %(traceparent)s, t.now, t.now
      FROM t
    ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key)
       WHERE state IN ('ready', 'delayed', 'running', 'suspended') DO NOTHING
    RETURNING j.id, j.queue),
woken AS (SELECT pg_notify('ultimate_jobs', ins.queue) FROM ins WHERE %(notify)s)
SELECT ins.id, (SELECT count(*) FROM woken) FROM ins
"""

JOB_LIVE_BY_KEY: LiteralString = """
-- The live row holding each dedupe key: the same columns and states as the live-key index.
SELECT j.id, j.run_id, j.name, coalesce(j.tenant_id, ''), j.idempotency_key
  FROM ultimate_jobs_job AS j
  JOIN unnest(%(name)b::text[], %(tenant)b::text[], %(key)b::text[]) AS k(name, tenant, key)
    ON j.name = k.name AND coalesce(j.tenant_id, '') = k.tenant AND j.idempotency_key = k.key
 WHERE j.state IN ('ready', 'delayed', 'running', 'suspended')
"""

JOB_CLAIM: LiteralString = """
-- Claim up to %(limit)s runnable jobs of one queue whose code this worker has.
-- The CTE is an optimisation fence so LIMIT bounds the UPDATE; SKIP LOCKED lets workers pass
-- each other; a paused queue yields nothing. Each claim gets a new fencing token.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
picked AS (
    SELECT c.id FROM ultimate_jobs_job AS c, t
     WHERE c.queue = %(queue)s AND c.state IN ('ready', 'delayed', 'suspended') AND c.run_at <= t.now
       AND c.name = ANY(%(names)b::text[])
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_queuepause AS p WHERE p.queue = %(queue)s)
     ORDER BY c.priority, c.run_at, c.id
     LIMIT %(limit)s
       FOR UPDATE OF c SKIP LOCKED)
UPDATE ultimate_jobs_job AS j
   SET state = 'running', attempt = j.attempt + 1, claimed_by = %(worker_id)s, claim = gen_random_uuid(),
       visible_at = t.now + %(visibility)s * interval '1 second',
       started_at = coalesce(j.started_at, t.now), updated_at = t.now
  FROM picked, t
 WHERE j.id = picked.id
RETURNING j.id, j.run_id, j.name, j.queue, j.payload::text, j.attempt, j.max_attempts, j.claim,
          j.tenant_id, j.enqueued_by, j.priority, j.concurrency_key, j.traceparent
"""

JOB_SETTLE_MANY: LiteralString = """
-- Settle finished attempts in one statement. Fenced: a row matches only while it is still
-- running under the claim token this worker was handed, so a cancelled or re-claimed job is
-- never overwritten. Rows that match nothing are answered by their absence.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_job AS j
   SET state = CASE WHEN v.state = 'retry'
                    THEN CASE WHEN v.delay > 0 THEN 'delayed' ELSE 'ready' END
                    ELSE v.state END,
       attempt = j.attempt - v.uncount,
       result = coalesce(v.result::jsonb, j.result),
       last_error = coalesce(v.last_error, j.last_error),
       error_code = coalesce(v.error_code, j.error_code),
       stop_reason = v.stop_reason,
       run_at = CASE WHEN v.state IN ('retry', 'ready', 'suspended')
                     THEN t.now + v.delay * interval '1 second' ELSE j.run_at END,
       visible_at = NULL,
       finished_at = CASE WHEN v.state IN ('done', 'failed', 'dead', 'cancelled') THEN t.now END,
       updated_at = t.now
  FROM t, unnest(%(id)b::uuid[], %(claim)b::uuid[], %(state)b::text[], %(result)b::text[],
                 %(last_error)b::text[], %(error_code)b::text[], %(stop_reason)b::text[], %(delay)b::float8[],
                 %(uncount)b::int[])
       AS v(id, claim, state, result, last_error, error_code, stop_reason, delay, uncount)
 WHERE j.id = v.id AND j.claim = v.claim AND j.state = 'running'
RETURNING j.id
"""

JOB_HEARTBEAT: LiteralString = """
-- Renew the lease of every job this worker holds, fenced on owner and claim token; a job
-- missing from the answer was cancelled or re-claimed.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_job AS j
   SET visible_at = t.now + %(visibility)s * interval '1 second', updated_at = t.now
  FROM t, unnest(%(id)b::uuid[], %(claim)b::uuid[]) AS v(id, claim)
 WHERE j.id = v.id AND j.claim = v.claim AND j.state = 'running' AND j.claimed_by = %(worker_id)s
RETURNING j.id
"""

JOB_RESCUE: LiteralString = """
-- Hand back running jobs whose lease lapsed (their worker died or stalled): a compare-and-set
-- on the claim token read under the lock. A lapse on the final attempt dead-letters the job
-- instead of running it forever; dead_letter=False jobs end failed.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
lapsed AS (
    SELECT l.id, l.claim FROM ultimate_jobs_job AS l, t
     WHERE l.state = 'running' AND l.visible_at < t.now
     ORDER BY l.visible_at LIMIT %(limit)s
       FOR UPDATE OF l SKIP LOCKED)
UPDATE ultimate_jobs_job AS j
   SET state = CASE WHEN j.attempt < j.max_attempts THEN 'ready'
                    WHEN j.name = ANY(%(no_dead_letter)b::text[]) THEN 'failed' ELSE 'dead' END,
       stop_reason = CASE WHEN j.attempt < j.max_attempts THEN NULL ELSE 'lease-lapsed' END,
       last_error = CASE WHEN j.attempt < j.max_attempts
                         THEN 'lease lapsed: worker ' || coalesce(j.claimed_by, '?') || ' died or stalled'
                         ELSE 'lease lapsed on the final attempt (worker ' || coalesce(j.claimed_by, '?')
                              || ' died or stalled)' END,
       error_code = 'X_LEASE_LAPSED',
       finished_at = CASE WHEN j.attempt < j.max_attempts THEN NULL ELSE t.now END,
       run_at = t.now, visible_at = NULL, updated_at = t.now
  FROM lapsed, t
 WHERE j.id = lapsed.id AND j.claim IS NOT DISTINCT FROM lapsed.claim AND j.state = 'running'
RETURNING j.id, j.name, j.queue, j.state
"""

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
        enqueued_by, max_attempts, run_at, concurrency_key, traceparent)
    SELECT v.id, t.txid, t.now, v.run_id, v.name, v.queue, v.priority, v.payload, v.idempotency_key,
           v.tenant_id, v.enqueued_by, v.max_attempts,
           coalesce(v.run_at, t.now + v.delay * interval '1 second'), v.concurrency_key, v.traceparent
      FROM t, unnest(%(id)b::uuid[], %(run_id)b::uuid[], %(name)b::text[], %(queue)b::text[],
                     %(priority)b::int[], %(payload)b::text[], %(idempotency_key)b::text[],
                     %(tenant_id)b::text[], %(enqueued_by)b::text[], %(max_attempts)b::int[],
                     %(delay)b::float8[], %(run_at)b::timestamptz[], %(concurrency_key)b::text[],
                     %(traceparent)b::text[])
           AS v(id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by,
                max_attempts, delay, run_at, concurrency_key, traceparent))
SELECT count(pg_notify('ultimate_jobs_outbox', q.queue)) FROM unnest(%(notify)b::text[]) AS q(queue)
"""

OUTBOX_STAGE_ONE: LiteralString = """
-- The one-row form of OUTBOX_STAGE_MANY (a single enqueue inside a transaction): no arrays to
-- build and unpack on the hot path.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now, pg_current_xact_id()::text::bigint AS txid),
staged AS (
    INSERT INTO ultimate_jobs_outboxentry (
        id, txid, staged_at, run_id, name, queue, priority, payload, idempotency_key, tenant_id,
        enqueued_by, max_attempts, run_at, concurrency_key, traceparent)
    SELECT %(id)s, t.txid, t.now, %(run_id)s, %(name)s, %(queue)s, %(priority)s, %(payload)s,
           %(idempotency_key)s, %(tenant_id)s, %(enqueued_by)s, %(max_attempts)s,
           coalesce(%(run_at)s::timestamptz, t.now + %(delay)s * interval '1 second'), %(concurrency_key)s,
           %(traceparent)s
      FROM t)
SELECT count(pg_notify('ultimate_jobs_outbox', %(queue)s)) FROM t WHERE %(notify)s
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
              o.enqueued_by, o.max_attempts, o.run_at, o.concurrency_key, o.traceparent, o.staged_at)
SELECT id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by, max_attempts,
       run_at, concurrency_key, traceparent
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

LISTEN: LiteralString = "LISTEN ultimate_jobs"


def _columns(rows: Sequence[JobRow]) -> dict[str, list[Any]]:
    return {
        "id": [r.id for r in rows], "run_id": [r.run_id for r in rows], "name": [r.name for r in rows],
        "queue": [r.queue for r in rows], "priority": [r.priority for r in rows],
        "payload": [r.payload for r in rows], "idempotency_key": [r.idempotency_key for r in rows],
        "tenant_id": [r.tenant_id for r in rows], "enqueued_by": [r.enqueued_by for r in rows],
        "max_attempts": [r.max_attempts for r in rows], "delay": [r.delay for r in rows],
        "run_at": [r.run_at for r in rows], "concurrency_key": [r.concurrency_key for r in rows],
        "traceparent": [r.traceparent for r in rows],
    }


def _settlement_columns(s: Sequence[Settlement], now: datetime | None) -> dict[str, Any]:
    return {
        "id": [x.id for x in s], "claim": [x.claim for x in s], "state": [x.state for x in s],
        "result": [x.result for x in s], "last_error": [x.last_error for x in s],
        "error_code": [x.error_code for x in s], "stop_reason": [x.stop_reason for x in s],
        "delay": [x.delay for x in s], "uncount": [1 if x.uncount else 0 for x in s], "now": now,
    }


def _one(row: JobRow) -> dict[str, Any]:
    return {
        "id": row.id, "run_id": row.run_id, "name": row.name, "queue": row.queue, "priority": row.priority,
        "payload": row.payload, "idempotency_key": row.idempotency_key, "tenant_id": row.tenant_id,
        "enqueued_by": row.enqueued_by, "max_attempts": row.max_attempts, "delay": row.delay, "run_at": row.run_at,
        "concurrency_key": row.concurrency_key, "traceparent": row.traceparent,
    }


class PostgresStore:
    """The store over a Django PostgreSQL connection alias.

    Statements go through a psycopg ``Cursor`` on the Django connection itself (same session,
    same transaction, so an enqueue inside ``atomic()`` commits or rolls back with the caller):
    server-side binding sends parameters in binary and lets psycopg prepare the hot statements,
    which Django's default client-side cursor does not. Errors are re-raised as Django's.
    ``OPTIONS={"prepare_threshold": None}`` turns preparing off (PgBouncer before 1.21).
    """

    supports_listen_notify = True

    def __init__(self, alias: str) -> None:
        from django.db import connections

        self.alias = alias
        self._connections = connections

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        import psycopg

        wrapper = self._connections[self.alias]
        with wrapper.wrap_database_errors:
            wrapper.ensure_connection()
            with psycopg.Cursor(wrapper.connection) as cursor:
                yield cursor

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[tuple[UUID, UUID, bool]]:
        """Insert ``rows`` (distinct keys); answer ``(id, run_id, deduped)`` per row, in order."""
        answers: dict[tuple[str, str, str], tuple[UUID, UUID, bool]] = {}
        pending = list(rows)
        with self._cursor() as cursor:
            for _ in range(5):
                if len(pending) == 1:
                    cursor.execute(JOB_INSERT_ONE, {**_one(pending[0]), "now": now,
                                                    "notify": pending[0].queue in notify})
                else:
                    cursor.execute(JOB_INSERT_MANY, {**_columns(pending), "now": now, "notify": list(notify)})
                inserted = {row[0] for row in cursor.fetchall()}
                missing = [r for r in pending if r.id not in inserted]
                for r in pending:
                    if r.id in inserted:
                        answers[r.dedupe_key] = (r.id, r.run_id, False)
                if not missing:
                    break
                cursor.execute(JOB_LIVE_BY_KEY, {"name": [r.name for r in missing],
                                                 "tenant": [r.tenant_id or "" for r in missing],
                                                 "key": [r.idempotency_key for r in missing]})
                for job_id, run_id, name, tenant, key in cursor.fetchall():
                    answers[(name, tenant, key)] = (job_id, run_id, True)
                # A key whose live row finished between the insert and the lookup is free again.
                pending = [r for r in missing if r.dedupe_key not in answers]
                if not pending:
                    break
        return [answers[r.dedupe_key] for r in rows]

    def job_claim(self, *, queue: str, names: Sequence[str], limit: int, worker_id: str, visibility: float,
                  now: datetime | None) -> list[ClaimedJob]:
        with self._cursor() as cursor:
            cursor.execute(JOB_CLAIM, {"queue": queue, "names": list(names), "limit": limit,
                                       "worker_id": worker_id, "visibility": visibility, "now": now})
            return [ClaimedJob(*row) for row in cursor.fetchall()]

    def job_settle_many(self, *, settlements: Sequence[Settlement], now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_SETTLE_MANY, _settlement_columns(settlements, now))
            return {row[0] for row in cursor.fetchall()}

    def job_settle_and_claim(self, *, settlements: Sequence[Settlement], claims: dict[str, int],
                             names: Sequence[str], worker_id: str, visibility: float,
                             now: datetime | None) -> tuple[set[UUID], dict[str, list[ClaimedJob]]]:
        """Settle finished attempts and claim per queue in one transaction, pipelined: one round trip
        and one commit for the whole pass."""
        import psycopg

        wrapper = self._connections[self.alias]
        with wrapper.wrap_database_errors:
            wrapper.ensure_connection()
            conn = wrapper.connection
            settle_cursor = psycopg.Cursor(conn) if settlements else None
            claim_cursors: dict[str, Any] = {}
            with conn.pipeline(), conn.transaction():
                if settle_cursor is not None:
                    settle_cursor.execute(JOB_SETTLE_MANY, _settlement_columns(settlements, now))
                for queue, limit in claims.items():
                    cursor = claim_cursors[queue] = psycopg.Cursor(conn)
                    cursor.execute(JOB_CLAIM, {"queue": queue, "names": list(names), "limit": limit,
                                               "worker_id": worker_id, "visibility": visibility, "now": now})
            settled = {row[0] for row in settle_cursor.fetchall()} if settle_cursor is not None else set()
            claimed = {q: [ClaimedJob(*row) for row in c.fetchall()] for q, c in claim_cursors.items()}
        return settled, claimed

    def job_heartbeat(self, *, held: Sequence[tuple[UUID, UUID]], worker_id: str, visibility: float,
                      now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_HEARTBEAT, {"id": [h[0] for h in held], "claim": [h[1] for h in held],
                                           "worker_id": worker_id, "visibility": visibility, "now": now})
            return {row[0] for row in cursor.fetchall()}

    def job_rescue(self, *, now: datetime | None, no_dead_letter: Sequence[str], limit: int = 500) -> list[tuple]:
        with self._cursor() as cursor:
            cursor.execute(JOB_RESCUE, {"now": now, "limit": limit, "no_dead_letter": list(no_dead_letter)})
            return cursor.fetchall()

    def outbox_stage_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                          notify: Sequence[str] = ()) -> None:
        """Stage ``rows`` in the connection's current transaction: one statement."""
        with self._cursor() as cursor:
            if len(rows) == 1:
                cursor.execute(OUTBOX_STAGE_ONE, {**_one(rows[0]), "now": now,
                                                  "notify": rows[0].queue in notify})
            else:
                cursor.execute(OUTBOX_STAGE_MANY, {**_columns(rows), "now": now, "notify": list(notify)})

    def outbox_claim(self, *, relay_id: str, limit: int, lease: float,
                     now: datetime | None) -> list[OutboxRow]:
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_CLAIM, {"relay_id": relay_id, "limit": limit, "lease": lease, "now": now})
            return [OutboxRow(*row) for row in cursor.fetchall()]

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
