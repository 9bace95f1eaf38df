"""Internal: the PostgreSQL store: every raw statement ultimate_jobs sends to PostgreSQL.

Raw SQL only where the ORM cannot say it: the claim CTE with ``FOR UPDATE SKIP LOCKED``,
``ON CONFLICT`` on the live-key index expression, batched settles over ``unnest`` arrays,
``LISTEN/NOTIFY``, the scheduler lease upsert and the batched retention purge. Each constant
carries its method's name. Every deadline is computed from ``coalesce(%(now)s, now())``: NULL
in production, so the database clock decides. Arrays are sent in binary (``%(name)b``): no text
quoting of thousands of elements.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, LiteralString
from uuid import UUID

from psycopg.rows import kwargs_row

from ultimate_jobs.db.listen import Listener
from ultimate_jobs.db.states import LIVE, RUNNABLE, TERMINAL
from ultimate_jobs.db.store import (
    ALREADY_COMPLETED,
    FENCED_OUT,
    JOBS_CHANNEL,
    OUTBOX_CHANNEL,
    WRITTEN,
    ClaimedJob,
    Inserted,
    JobRow,
    LeaderLease,
    Purged,
    Rescued,
    SettledAndClaimed,
    Settlement,
    StepRow,
    StepWrite,
)

# The rows of a batch as one array per column (sent in binary), unpacked into v: shared by the
# insert and the outbox's staging, so both read a batch the same way.
_JOB_ROWS_ARRAYS: LiteralString = """unnest(%(id)b::uuid[], %(run_id)b::uuid[], %(name)b::text[], %(queue)b::text[],
                     %(priority)b::int[], %(payload)b::text[], %(idempotency_key)b::text[],
                     %(tenant_id)b::text[], %(enqueued_by)b::text[], %(max_attempts)b::int[],
                     %(delay)b::float8[], %(run_at)b::timestamptz[], %(concurrency_key)b::text[],
                     %(traceparent)b::text[])
           AS v(id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by,
                max_attempts, delay, run_at, concurrency_key, traceparent)"""

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
      FROM t, """ + _JOB_ROWS_ARRAYS + """
    ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key)
       WHERE state IN """ + LIVE + """ DO NOTHING
    RETURNING j.id, j.queue),
woken AS (SELECT pg_notify('""" + JOBS_CHANNEL + """', q.queue) FROM (SELECT DISTINCT queue FROM ins) AS q
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
       WHERE state IN """ + LIVE + """ DO NOTHING
    RETURNING j.id, j.queue),
woken AS (SELECT pg_notify('""" + JOBS_CHANNEL + """', ins.queue) FROM ins WHERE %(notify)s)
SELECT ins.id, (SELECT count(*) FROM woken) FROM ins
"""

JOB_LIVE_BY_KEY: LiteralString = """
-- The live row holding each dedupe key: the same columns and states as the live-key index.
SELECT j.id, j.run_id, j.name, coalesce(j.tenant_id, ''), j.idempotency_key
  FROM ultimate_jobs_job AS j
  JOIN unnest(%(name)b::text[], %(tenant)b::text[], %(key)b::text[]) AS k(name, tenant, key)
    ON j.name = k.name AND coalesce(j.tenant_id, '') = k.tenant AND j.idempotency_key = k.key
 WHERE j.state IN """ + LIVE + """
"""

JOB_CLAIM: LiteralString = """
-- Claim up to %(limit)s runnable jobs of one queue whose code this worker has.
-- The CTE is an optimisation fence so LIMIT bounds the UPDATE; SKIP LOCKED lets workers pass
-- each other; a paused queue yields nothing. Each claim gets a new fencing token.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
picked AS (
    SELECT c.id FROM ultimate_jobs_job AS c, t
     WHERE c.queue = %(queue)s AND c.state IN """ + RUNNABLE + """ AND c.run_at <= t.now
       AND c.name = ANY(%(names)b::text[])
       AND (c.tenant_id IS NULL OR NOT c.tenant_id = ANY(%(blocked)b::text[]))
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

JOB_SETTLE_MANY: LiteralString = """
-- Settle finished attempts in one statement. Fenced: a row matches only while it is still
-- running under the claim token this worker was handed, so a cancelled or re-claimed job is
-- never overwritten. Rows that match nothing are answered by their absence. The outcome
-- counters move in the same statement (the counted CTE), so a count can never disagree with
-- a settle that rolled back.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
settled AS (
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
           finished_at = CASE WHEN v.state IN """ + TERMINAL + """ THEN t.now END,
           updated_at = t.now
      FROM t, unnest(%(id)b::uuid[], %(claim)b::uuid[], %(state)b::text[], %(result)b::text[],
                     %(last_error)b::text[], %(error_code)b::text[], %(stop_reason)b::text[], %(delay)b::float8[],
                     %(uncount)b::int[])
           AS v(id, claim, state, result, last_error, error_code, stop_reason, delay, uncount)
     WHERE j.id = v.id AND j.claim = v.claim AND j.state = 'running'
       AND j.id = ANY(%(id)b::uuid[])  -- lets the planner walk the primary key, whatever its statistics say
    RETURNING j.id, j.name, j.queue,
              CASE v.state WHEN 'retry' THEN 'retried' WHEN 'ready' THEN 'interrupted' ELSE v.state END
              AS outcome),
counted AS (""" + _COUNT_SETTLED + """)
SELECT id FROM settled
"""

JOB_HEARTBEAT: LiteralString = """
-- Renew the lease of every job this worker holds, fenced on owner and claim token; a job
-- missing from the answer was cancelled or re-claimed.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_job AS j
   SET visible_at = t.now + %(visibility)s * interval '1 second', updated_at = t.now
  FROM t, unnest(%(id)b::uuid[], %(claim)b::uuid[]) AS v(id, claim)
 WHERE j.id = v.id AND j.claim = v.claim AND j.state = 'running' AND j.claimed_by = %(worker_id)s
   AND j.id = ANY(%(id)b::uuid[])
RETURNING j.id
"""

JOB_RESCUE: LiteralString = """
-- Hand back running jobs whose lease lapsed (their worker died or stalled): a compare-and-set
-- on the claim token read under the lock. A lapse on the final attempt dead-letters the job
-- instead of running it forever; dead_letter=False jobs end failed. Only names registered in
-- this process are rescued: their retry policy is known here. Counted like a settle.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
lapsed AS (
    SELECT l.id, l.claim FROM ultimate_jobs_job AS l, t
     WHERE l.state = 'running' AND l.visible_at < t.now AND l.name = ANY(%(names)b::text[])
     ORDER BY l.visible_at LIMIT %(limit)s
       FOR UPDATE OF l SKIP LOCKED),
settled AS (
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
    RETURNING j.id, j.name, j.queue, j.state,
              CASE j.state WHEN 'ready' THEN 'retried' ELSE j.state END AS outcome),
counted AS (""" + _COUNT_SETTLED + """)
SELECT id, name, queue, state FROM settled
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

QUEUE_WAKE: LiteralString = """
-- Wake idle workers of these queues at commit (an operator retried or promoted jobs there).
SELECT count(pg_notify('""" + JOBS_CHANNEL + """', q.queue)) FROM unnest(%(queues)b::text[]) AS q(queue)
"""

LEASE_ACQUIRE: LiteralString = """
-- Take a free slot of a concurrency key for one job. Free: no row, an expired row (its worker
-- died), or this job's own leftover, which is preferred (a run never fails on its own slot).
-- The (lease_key, slot) primary key decides races: of two workers taking one slot, the loser's
-- conditional upsert answers no row.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
cand AS (
    SELECT s.slot FROM generate_series(0, %(limit)s - 1) AS s(slot), t
     WHERE NOT EXISTS (SELECT 1 FROM ultimate_jobs_joblease AS busy
                        WHERE busy.lease_key = %(key)s AND busy.slot = s.slot
                          AND busy.expires_at > t.now AND busy.job_id <> %(job_id)s)
     ORDER BY EXISTS (SELECT 1 FROM ultimate_jobs_joblease AS own
                       WHERE own.lease_key = %(key)s AND own.slot = s.slot AND own.job_id = %(job_id)s) DESC,
              s.slot
     LIMIT 1)
INSERT INTO ultimate_jobs_joblease AS l (lease_key, slot, holder, job_id, expires_at)
SELECT %(key)s, cand.slot, %(holder)s, %(job_id)s, t.now + %(ttl)s * interval '1 second' FROM cand, t
ON CONFLICT (lease_key, slot) DO UPDATE
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
 WHERE l.lease_key = v.key AND l.slot = v.slot AND l.job_id = v.job_id AND l.holder = %(holder)s
   AND l.expires_at > t.now
RETURNING l.job_id
"""

LEASE_RELEASE: LiteralString = """
-- Hand one slot back, fenced on holder and job (a slot taken over after expiry is not ours).
DELETE FROM ultimate_jobs_joblease
 WHERE lease_key = %(key)s AND slot = %(slot)s AND holder = %(holder)s AND job_id = %(job_id)s
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

JOB_PURGE_FINISHED: LiteralString = """
-- Delete one batch of finished jobs past their retention (done after done_retention; dead,
-- failed and cancelled after dead_retention), then the steps of runs left with no job. SKIP
-- LOCKED lets two purges share the work; the batch bounds each transaction. The orphan check
-- excludes `doomed` because a data-modifying CTE's siblings still see the deleted rows.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
doomed AS (
    SELECT j.id, j.run_id FROM ultimate_jobs_job AS j, t
     WHERE (j.state = 'done' AND j.finished_at < t.now - %(done_retention)s * interval '1 second')
        OR (j.state IN ('dead', 'failed', 'cancelled')
            AND j.finished_at < t.now - %(dead_retention)s * interval '1 second')
     LIMIT %(limit)s
       FOR UPDATE OF j SKIP LOCKED),
gone AS (DELETE FROM ultimate_jobs_job AS j USING doomed WHERE j.id = doomed.id RETURNING j.run_id),
steps AS (
    DELETE FROM ultimate_jobs_jobstep AS s
     WHERE s.run_id IN (SELECT g.run_id FROM gone AS g)
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_job AS k
                        WHERE k.run_id = s.run_id AND k.id NOT IN (SELECT d.id FROM doomed AS d))
    RETURNING s.id)
SELECT (SELECT count(*) FROM gone) AS jobs, (SELECT count(*) FROM steps) AS steps
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
        enqueued_by, max_attempts, run_at, concurrency_key, traceparent)
    SELECT %(id)s, t.txid, t.now, %(run_id)s, %(name)s, %(queue)s, %(priority)s, %(payload)s,
           %(idempotency_key)s, %(tenant_id)s, %(enqueued_by)s, %(max_attempts)s,
           coalesce(%(run_at)s::timestamptz, t.now + %(delay)s * interval '1 second'), %(concurrency_key)s,
           %(traceparent)s
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

EVENT_PURGE: LiteralString = """
-- Delete up to %(limit)s events published longer than the retention ago that no open wait could
-- still be answered by (an open wait on the name, begun no later than the publish: the waiting
-- index serves it; its match is not consulted, so this errs on keeping). SKIP LOCKED lets two
-- purges share the work. No ORDER BY: published_at has no index of its own, and any expired
-- batch will do.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
old AS (
    SELECT e.id FROM ultimate_jobs_jobevent AS e, t
     WHERE e.published_at < t.now - %(retention)s * interval '1 second'
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_jobstep AS s
                        WHERE s.event = e.name AND s.status = 'started' AND s.started_at <= e.published_at)
     LIMIT %(limit)s
       FOR UPDATE OF e SKIP LOCKED)
DELETE FROM ultimate_jobs_jobevent AS d USING old WHERE d.id = old.id
"""

JOB_RELEASE_UNHELD: LiteralString = """
-- Hand back rows running under this worker's id that it does not hold: a claim that committed
-- after its connection dropped, so the worker never saw its answer. Uncounted (never ran).
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE ultimate_jobs_job AS j
   SET state = 'ready', attempt = j.attempt - 1, visible_at = NULL, run_at = t.now, updated_at = t.now
  FROM t
 WHERE j.state = 'running' AND j.claimed_by = %(worker_id)s AND NOT j.id = ANY(%(held)b::uuid[])
RETURNING j.id
"""

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
       extract(epoch FROM s.wake_at - coalesce(%(now)s::timestamptz, clock_timestamp()))::float8 AS remaining,
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
notified AS (SELECT pg_notify('""" + JOBS_CHANNEL + """', q.queue) FROM (SELECT DISTINCT queue FROM woken) AS q)
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
SELECT count(*)::int, (SELECT count(*) FROM (SELECT pg_notify('""" + JOBS_CHANNEL + """', queue) FROM woken) AS n)::int
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


def _staged_row(**columns: Any) -> JobRow:
    """A claimed outbox row as the JobRow it was staged as: its ids, ``run_at`` fixed, no delay."""
    return JobRow(delay=0.0, **columns)


# Answers built by column name (the RETURNING / SELECT aliases), never by position.
_CLAIMED = kwargs_row(ClaimedJob)
_STAGED = kwargs_row(_staged_row)

ONLY_WHEN_ASKED = 2**31 - 1  # a prepare_threshold no statement reaches by being run often


class PostgresStore:
    """The store over a Django PostgreSQL connection alias.

    Statements go through a psycopg ``Cursor`` on the Django connection itself (same session,
    same transaction, so an enqueue inside ``atomic()`` commits or rolls back with the caller):
    server-side binding sends parameters (and the arrays of a batch) in binary, which Django's
    default client-side cursor does not. Errors are re-raised as Django's.

    The hot statements (enqueue, claim, settle, heartbeat) are prepared on each connection:
    planned once instead of on every call (``bench/RESULTS.md`` measured 1.5x on a drain).
    Django's own connection never prepares, so the store asks per statement — unless the
    database's ``OPTIONS`` name ``prepare_threshold`` themselves, which hands the decision back
    to psycopg: ``"prepare_threshold": None`` turns it off (PgBouncer before 1.21 in transaction
    mode cannot keep a prepared statement across transactions).
    """

    supports_listen_notify = True

    def __init__(self, alias: str) -> None:
        from django.db import connections

        self.alias = alias
        self._connections = connections

    def _prepare(self) -> bool | None:
        """``prepare=`` for a hot statement: True, or None when OPTIONS decide (see the class)."""
        options = self._connections[self.alias].settings_dict.get("OPTIONS") or {}
        return None if "prepare_threshold" in options else True

    def _connect(self, wrapper: Any) -> Any:
        """The open psycopg connection, able to prepare what the store asks to.

        psycopg prepares nothing, ``prepare=True`` included, while ``prepare_threshold`` is None,
        which is how Django opens it. A threshold no statement reaches by count leaves every
        other statement unprepared (Django's own cursors bind client-side and never prepare).
        """
        wrapper.ensure_connection()
        conn = wrapper.connection
        if conn.prepare_threshold is None and self._prepare():
            conn.prepare_threshold = ONLY_WHEN_ASKED
        return conn

    @contextlib.contextmanager
    def _cursor(self, row_factory: Any = None) -> Iterator[Any]:
        """A cursor on the Django connection; ``row_factory`` (e.g. ``kwargs_row(ClaimedJob)``) builds
        each answer row by column name."""
        import psycopg

        wrapper = self._connections[self.alias]
        with wrapper.wrap_database_errors:
            cursor = psycopg.Cursor(self._connect(wrapper), row_factory=row_factory) if row_factory else \
                psycopg.Cursor(self._connect(wrapper))
            with cursor:
                yield cursor

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[Inserted]:
        answers: dict[tuple[str, str, str], Inserted] = {}
        pending = list(rows)
        prepare = self._prepare()
        with self._cursor() as cursor:
            for _ in range(5):
                if len(pending) == 1:
                    cursor.execute(JOB_INSERT_ONE, {**_one(pending[0]), "now": now,
                                                    "notify": pending[0].queue in notify}, prepare=prepare)
                else:
                    cursor.execute(JOB_INSERT_MANY, {**_columns(pending), "now": now, "notify": list(notify)},
                                   prepare=prepare)
                inserted = {row[0] for row in cursor.fetchall()}
                missing = [r for r in pending if r.id not in inserted]
                for r in pending:
                    if r.id in inserted:
                        answers[r.dedupe_key] = Inserted(id=r.id, run_id=r.run_id, deduped=False)
                if not missing:
                    break
                cursor.execute(JOB_LIVE_BY_KEY, {"name": [r.name for r in missing],
                                                 "tenant": [r.tenant_id or "" for r in missing],
                                                 "key": [r.idempotency_key for r in missing]})
                for job_id, run_id, name, tenant, key in cursor.fetchall():
                    answers[(name, tenant, key)] = Inserted(id=job_id, run_id=run_id, deduped=True)
                # A key whose live row finished between the insert and the lookup is free again.
                pending = [r for r in missing if r.dedupe_key not in answers]
                if not pending:
                    break
        return [answers[r.dedupe_key] for r in rows]

    def job_claim(self, *, queue: str, names: Sequence[str], limit: int, worker_id: str, visibility: float,
                  now: datetime | None, blocked_tenants: Sequence[str] = ()) -> list[ClaimedJob]:
        with self._cursor(_CLAIMED) as cursor:
            cursor.execute(JOB_CLAIM, {"queue": queue, "names": list(names), "limit": limit,
                                       "worker_id": worker_id, "visibility": visibility, "now": now,
                                       "blocked": list(blocked_tenants)}, prepare=self._prepare())
            return list(cursor.fetchall())

    def job_settle_many(self, *, settlements: Sequence[Settlement], now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_SETTLE_MANY, _settlement_columns(settlements, now), prepare=self._prepare())
            return {row[0] for row in cursor.fetchall()}

    def job_settle_and_claim(self, *, settlements: Sequence[Settlement], claims: dict[str, int],
                             names: Sequence[str], worker_id: str, visibility: float,
                             now: datetime | None, blocked_tenants: Sequence[str] = (),
                             ) -> SettledAndClaimed:
        """Settle finished attempts and claim per queue in one transaction, pipelined: one round trip
        and one commit for the whole pass."""
        import psycopg

        wrapper = self._connections[self.alias]
        prepare = self._prepare()
        with wrapper.wrap_database_errors:
            conn = self._connect(wrapper)
            settle_cursor = psycopg.Cursor(conn) if settlements else None
            claim_cursors: dict[str, Any] = {}
            with conn.pipeline(), conn.transaction():
                if settle_cursor is not None:
                    settle_cursor.execute(JOB_SETTLE_MANY, _settlement_columns(settlements, now), prepare=prepare)
                for queue, limit in claims.items():
                    cursor = claim_cursors[queue] = psycopg.Cursor(conn, row_factory=_CLAIMED)
                    cursor.execute(JOB_CLAIM, {"queue": queue, "names": list(names), "limit": limit,
                                               "worker_id": worker_id, "visibility": visibility, "now": now,
                                               "blocked": list(blocked_tenants)}, prepare=prepare)
            settled = {row[0] for row in settle_cursor.fetchall()} if settle_cursor is not None else set()
            claimed: dict[str, list[ClaimedJob]] = {q: c.fetchall() for q, c in claim_cursors.items()}
        return SettledAndClaimed(settled=settled, claimed=claimed)

    def lease_acquire(self, *, key: str, limit: int, job_id: UUID, holder: str, ttl: float,
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

    def lease_renew(self, *, held: Sequence[tuple[str, int, UUID]], holder: str, ttl: float,
                    now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(LEASE_RENEW, {"key": [h[0] for h in held], "slot": [h[1] for h in held],
                                         "job_id": [h[2] for h in held], "holder": holder, "ttl": ttl, "now": now})
            return {row[0] for row in cursor.fetchall()}

    def lease_release(self, *, key: str, slot: int, job_id: UUID, holder: str) -> None:
        with self._cursor() as cursor:
            cursor.execute(LEASE_RELEASE, {"key": key, "slot": slot, "job_id": job_id, "holder": holder})

    def job_release_unheld(self, *, worker_id: str, held: Sequence[UUID], now: datetime | None) -> list[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_RELEASE_UNHELD, {"worker_id": worker_id, "held": list(held), "now": now})
            return [row[0] for row in cursor.fetchall()]

    def job_heartbeat(self, *, held: Sequence[tuple[UUID, UUID]], worker_id: str, visibility: float,
                      now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_HEARTBEAT, {"id": [h[0] for h in held], "claim": [h[1] for h in held],
                                           "worker_id": worker_id, "visibility": visibility, "now": now},
                           prepare=self._prepare())
            return {row[0] for row in cursor.fetchall()}

    def job_rescue(self, *, now: datetime | None, names: Sequence[str], no_dead_letter: Sequence[str],
                   limit: int = 500) -> list[Rescued]:
        with self._cursor(kwargs_row(Rescued)) as cursor:
            cursor.execute(JOB_RESCUE, {"now": now, "limit": limit, "names": list(names),
                                        "no_dead_letter": list(no_dead_letter)})
            return list(cursor.fetchall())

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

    def job_purge_finished(self, *, done_retention: float, dead_retention: float, limit: int,
                           now: datetime | None) -> Purged:
        with self._cursor(kwargs_row(Purged)) as cursor:
            cursor.execute(JOB_PURGE_FINISHED, {"done_retention": done_retention,
                                                "dead_retention": dead_retention, "limit": limit, "now": now})
            purged: Purged = cursor.fetchone()
        return purged

    def queue_wake(self, *, queues: Sequence[str]) -> None:
        if queues:
            with self._cursor() as cursor:
                cursor.execute(QUEUE_WAKE, {"queues": sorted(set(queues))})

    def listen(self, *, channel: str, on_wake: Callable[[str], None], queues: Iterable[str] = ()) -> Listener:
        listener = Listener(self.alias, queues, on_wake, channel=channel)
        listener.start()
        return listener

    def counter_fold(self, *, before: datetime) -> int:
        """Fold 1-minute counter buckets older than ``before`` into the coarser tiers; answer rows written."""
        with self._cursor() as cursor:
            cursor.execute(COUNTER_FOLD, {"before": before})
            return cursor.rowcount

    def counter_add(self, *, events: Sequence[tuple[str, str, str]], now: datetime | None) -> None:
        """Count one ``(name, queue, outcome)`` event each (minute bucket and all-time row)."""
        if not events:
            return
        with self._cursor() as cursor:
            cursor.execute(COUNTER_ADD, {"name": [e[0] for e in events], "queue": [e[1] for e in events],
                                         "outcome": [e[2] for e in events], "now": now})

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

    def event_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        """Delete one batch of events past ``retention`` that no open wait could match; answer how many."""
        with self._cursor() as cursor:
            cursor.execute(EVENT_PURGE, {"retention": retention, "now": now, "limit": limit})
            return int(cursor.rowcount)

    # -- durable runs ----------------------------------------------------------------------------

    def step_list(self, *, run_id: UUID, now: datetime | None) -> list[StepRow]:
        with self._cursor(kwargs_row(StepRow)) as cursor:
            cursor.execute(STEP_LIST, {"run_id": run_id, "now": now}, prepare=self._prepare())
            return list(cursor.fetchall())

    def step_begin(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, wake_in: float | None,
                   event: str | None, event_match: str | None, now: datetime | None) -> datetime | None:
        """Insert the step as ``started``; answer its ``started_at``, or None when fenced out."""
        with self._cursor() as cursor:
            cursor.execute(STEP_BEGIN, {"job_id": job_id, "claim": claim, "run_id": run_id, "name": name, "seq": seq,
                                        "wake_in": wake_in, "event": event, "event_match": event_match, "now": now})
            row = cursor.fetchone()
        return None if row is None else row[0]

    def step_complete(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, output: str,
                      count: bool, now: datetime | None) -> StepWrite:
        with self._cursor() as cursor:
            cursor.execute(STEP_COMPLETE, {"job_id": job_id, "claim": claim, "run_id": run_id, "name": name,
                                           "seq": seq, "output": output, "count": 1 if count else 0, "now": now},
                           prepare=self._prepare())
            fenced, written = cursor.fetchone()
        return _verdict(fenced, written)

    def step_fail(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, error: str, count: bool,
                  now: datetime | None) -> StepWrite:
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


def _verdict(fenced: int, written: int) -> StepWrite:
    if not fenced:
        return FENCED_OUT
    return WRITTEN if written else ALREADY_COMPLETED
