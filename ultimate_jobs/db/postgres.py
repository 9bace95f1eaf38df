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

from .store import ALREADY_COMPLETED, FENCED_OUT, WRITTEN, ClaimedJob, Settlement, StepRow

if TYPE_CHECKING:
    from ..enqueue import JobRow

CHANNEL = "ultimate_jobs"

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

LISTEN: LiteralString = "LISTEN ultimate_jobs"

# -- durable runs ---------------------------------------------------------------------------------
# Event windows (a wait's start, an event's publish time) are stamped with clock_timestamp(), not
# now(): now() is the *transaction's* start, and a publish inside a long request transaction would
# otherwise carry a time before a wait that began while it ran. The parameter keeps the usual
# ``coalesce(%(now)s, ...)`` shape, so a test clock still decides.

STEP_LIST: LiteralString = """
-- Every step of one run in execution order: the one read a replay starts from (never a read per
-- step). ``remaining`` is the seconds until wake_at on the database clock, so a sleep or a wait's
-- timeout is judged by the clock every worker shares.
SELECT s.name, s.status, s.output::text, s.executions, s.seq, s.started_at, s.wake_at,
       extract(epoch FROM s.wake_at - coalesce(%(now)s::timestamptz, clock_timestamp()))::float8,
       s.event, s.event_match::text
  FROM ultimate_jobs_jobstep AS s
 WHERE s.run_id = %(run_id)s
 ORDER BY s.seq, s.id
"""

_STEP_FENCE: LiteralString = """fence AS (
    -- Fencing: only while the job is still running under this claim. FOR KEY SHARE keeps the
    -- rescue and the claim (FOR UPDATE ... SKIP LOCKED) off the row until this write commits,
    -- without blocking heartbeats and settles (plain updates take a weaker lock).
    SELECT j.id FROM ultimate_jobs_job AS j
     WHERE j.id = %(job_id)s AND j.claim = %(claim)s AND j.state = 'running'
       FOR KEY SHARE)"""

STEP_BEGIN: LiteralString = """
-- Persist a step's start before its body or its wait: a once=True step's "started", a sleep's
-- wake time, an event wait's window and what it waits for. Fenced; an existing row is never
-- overwritten (the replay would have seen it: only a run that is not ours meets one).
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
""" + _STEP_FENCE + """
INSERT INTO ultimate_jobs_jobstep AS s (
    run_id, name, status, output, error, executions, seq, started_at, completed_at, wake_at, event, event_match)
SELECT %(run_id)s, %(name)s, 'started', NULL, NULL, 1, %(seq)s::int, t.now, NULL,
       t.now + %(wake_in)s::float8 * interval '1 second', %(event)s::text, %(event_match)s::jsonb
  FROM fence, t
ON CONFLICT (run_id, name) DO NOTHING
RETURNING s.started_at
"""

STEP_COMPLETE: LiteralString = """
-- Checkpoint a step's JSON output. Completed is final: the upsert never overwrites a completed
-- row (a late event after a recorded timeout rewrites nothing). Fenced; answers whether the
-- fence held and whether a row was written.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
""" + _STEP_FENCE + """,
up AS (
    INSERT INTO ultimate_jobs_jobstep AS s (
        run_id, name, status, output, error, executions, seq, started_at, completed_at)
    SELECT %(run_id)s, %(name)s, 'completed', %(output)s::jsonb, NULL, %(count)s::int, %(seq)s::int, t.now, t.now
      FROM fence, t
    ON CONFLICT (run_id, name) DO UPDATE
       SET status = 'completed', output = excluded.output, error = NULL,
           executions = s.executions + %(count)s::int, completed_at = excluded.completed_at
     WHERE s.status <> 'completed'
    RETURNING 1)
SELECT (SELECT count(*) FROM fence)::int, (SELECT count(*) FROM up)::int
"""

STEP_FAIL: LiteralString = """
-- Record a failed execution of a step (the error text, one more execution), unless it completed.
-- Fenced like STEP_COMPLETE.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
""" + _STEP_FENCE + """,
up AS (
    INSERT INTO ultimate_jobs_jobstep AS s (run_id, name, status, output, error, executions, seq, started_at)
    SELECT %(run_id)s, %(name)s, 'failed', NULL, %(error)s, %(count)s::int, %(seq)s::int, t.now
      FROM fence, t
    ON CONFLICT (run_id, name) DO UPDATE
       SET status = 'failed', error = excluded.error, executions = s.executions + %(count)s::int
     WHERE s.status <> 'completed'
    RETURNING 1)
SELECT (SELECT count(*) FROM fence)::int, (SELECT count(*) FROM up)::int
"""

EVENT_PUBLISH: LiteralString = """
-- Store one event in the caller's transaction and, in the same statement, wake the suspended
-- runs waiting for it (open wait on this name, begun no later than the publish, match contained
-- in the payload): run_at moves to now and their queues are notified. All of it is transactional:
-- a rolled-back publish leaves no event, wakes nobody and sends no NOTIFY.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
ev AS (
    INSERT INTO ultimate_jobs_jobevent (id, name, payload, published_at)
    SELECT %(id)s, %(name)s, %(payload)s::jsonb, t.now FROM t
    RETURNING payload, published_at),
woken AS (
    UPDATE ultimate_jobs_job AS j SET run_at = t.now, updated_at = t.now
      FROM t, ev, ultimate_jobs_jobstep AS s
     WHERE s.event = %(name)s AND s.status = 'started' AND s.started_at <= ev.published_at
       AND ev.payload @> coalesce(s.event_match, '{}'::jsonb)
       AND j.run_id = s.run_id AND j.state = 'suspended' AND j.run_at > t.now
    RETURNING j.queue),
notified AS (SELECT pg_notify('ultimate_jobs', q.queue) FROM (SELECT DISTINCT queue FROM woken) AS q)
SELECT (SELECT count(*) FROM woken)::int, (SELECT count(*) FROM notified)::int
"""

EVENT_FIND: LiteralString = """
-- The first event of one name published since a wait began whose payload contains the wait's
-- match (jsonb containment): the answer the wait records.
SELECT e.payload::text FROM ultimate_jobs_jobevent AS e
 WHERE e.name = %(name)s AND e.published_at >= %(since)s::timestamptz
   AND e.payload @> coalesce(%(match)s::jsonb, '{}'::jsonb)
 ORDER BY e.published_at, e.id
 LIMIT 1
"""

JOB_PROGRESS: LiteralString = """
-- Record a run's progress ({done, total, note}); fenced like every write on a claimed job.
UPDATE ultimate_jobs_job AS j SET progress = %(progress)s::jsonb
 WHERE j.id = %(job_id)s AND j.claim = %(claim)s AND j.state = 'running'
RETURNING j.id
"""

JOB_WAKE_WAITER: LiteralString = """
-- Once a run settled suspended on an event wait: wake it at once when a matching event committed
-- while it was suspending (after its own look, before its settle), which the publish could not
-- wake because the row was still running. A compare on state, so a re-claimed row is untouched.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
woken AS (
    UPDATE ultimate_jobs_job AS j SET run_at = t.now, updated_at = t.now
      FROM t
     WHERE j.id = %(job_id)s AND j.state = 'suspended' AND j.run_at > t.now
       AND EXISTS (SELECT 1 FROM ultimate_jobs_jobstep AS s
                     JOIN ultimate_jobs_jobevent AS e ON e.name = s.event AND e.published_at >= s.started_at
                    WHERE s.run_id = j.run_id AND s.status = 'started' AND s.event IS NOT NULL
                      AND e.payload @> coalesce(s.event_match, '{}'::jsonb))
    RETURNING j.queue)
SELECT count(*)::int, (SELECT count(*) FROM (SELECT pg_notify('ultimate_jobs', queue) FROM woken) AS n)::int
  FROM woken
"""


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

    # -- durable runs ----------------------------------------------------------------------------

    def step_list(self, *, run_id: UUID, now: datetime | None) -> list[StepRow]:
        with self._cursor() as cursor:
            cursor.execute(STEP_LIST, {"run_id": run_id, "now": now})
            return [StepRow(*row) for row in cursor.fetchall()]

    def step_begin(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, wake_in: float | None,
                   event: str | None, event_match: str | None, now: datetime | None) -> datetime | None:
        """Insert the step as ``started``; answer its ``started_at``, or None when fenced out."""
        with self._cursor() as cursor:
            cursor.execute(STEP_BEGIN, {"job_id": job_id, "claim": claim, "run_id": run_id, "name": name, "seq": seq,
                                        "wake_in": wake_in, "event": event, "event_match": event_match, "now": now})
            row = cursor.fetchone()
        return None if row is None else row[0]

    def step_complete(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, output: str,
                      count: bool, now: datetime | None) -> str:
        with self._cursor() as cursor:
            cursor.execute(STEP_COMPLETE, {"job_id": job_id, "claim": claim, "run_id": run_id, "name": name,
                                           "seq": seq, "output": output, "count": 1 if count else 0, "now": now})
            fenced, written = cursor.fetchone()
        return _verdict(fenced, written)

    def step_fail(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, error: str, count: bool,
                  now: datetime | None) -> str:
        with self._cursor() as cursor:
            cursor.execute(STEP_FAIL, {"job_id": job_id, "claim": claim, "run_id": run_id, "name": name, "seq": seq,
                                       "error": error, "count": 1 if count else 0, "now": now})
            fenced, written = cursor.fetchone()
        return _verdict(fenced, written)

    def event_publish(self, *, event_id: UUID, name: str, payload: str, now: datetime | None) -> int:
        """Store the event on the caller's connection (its transaction); answer how many runs it woke."""
        with self._cursor() as cursor:
            cursor.execute(EVENT_PUBLISH, {"id": event_id, "name": name, "payload": payload, "now": now})
            return int(cursor.fetchone()[0])

    def event_find(self, *, name: str, match: str | None, since: datetime) -> str | None:
        with self._cursor() as cursor:
            cursor.execute(EVENT_FIND, {"name": name, "match": match, "since": since})
            row = cursor.fetchone()
        return None if row is None else row[0]

    def job_progress(self, *, job_id: UUID, claim: UUID, progress: str, now: datetime | None) -> bool:
        with self._cursor() as cursor:
            cursor.execute(JOB_PROGRESS, {"job_id": job_id, "claim": claim, "progress": progress})
            return cursor.fetchone() is not None

    def job_wake_waiter(self, *, job_id: UUID, now: datetime | None) -> bool:
        with self._cursor() as cursor:
            cursor.execute(JOB_WAKE_WAITER, {"job_id": job_id, "now": now})
            return bool(cursor.fetchone()[0])


def _verdict(fenced: int, written: int) -> str:
    if not fenced:
        return FENCED_OUT
    return WRITTEN if written else ALREADY_COMPLETED
