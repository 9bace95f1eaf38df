"""Internal: the job table's statements on PostgreSQL: insert (the dedupe), claim, settle, heartbeat,
rescue, the lost claim's hand-back, purge, and the operator's wake-up."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString
from uuid import UUID

from django.db import transaction
from psycopg.pq import TransactionStatus
from psycopg.rows import kwargs_row

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.postgres.counters import _COUNT_SETTLED
from ultimate_jobs.db.postgres.inserts import InsertStatements
from ultimate_jobs.db.states import RUN_FIRST, RUN_JOINED, TERMINAL
from ultimate_jobs.db.store import (
    ATTEMPT_ERROR_CHARS,
    ATTEMPTS_KEPT,
    JOBS_CHANNEL,
    ClaimedJob,
    Purged,
    Rescued,
    SettledAndClaimed,
    Settlement,
)
from ultimate_jobs.errors import X_LEASE_LAPSED

# One entry of a row's attempt history (Job.attempts), appended by the statement that settles
# the attempt and trimmed to the newest %(kept)s; an error is cut in its middle, keeping the
# traceback's last line (``ExcClass: message``). Expects ``j`` (the row before the update) and ``t``.
_ATTEMPT_APPEND: LiteralString = """(CASE WHEN jsonb_array_length(j.attempts) >= %(kept)s::int THEN j.attempts - 0
                     ELSE j.attempts END)
               || jsonb_build_array(jsonb_build_object(
                      'attempt', j.attempt, 'worker', j.claimed_by, 'started_at', {started_at},
                      'finished_at', t.now, 'outcome', {outcome}, 'error_code', {error_code},
                      'error', CASE WHEN length({error}) > %(error_chars)s::int
                                    THEN left({error}, %(error_chars)s::int / 4) || chr(10) || '...' || chr(10)
                                         || right({error}, %(error_chars)s::int * 3 / 4)
                                    ELSE {error} END))"""

JOB_CLAIM: LiteralString = """
-- Claim up to %(limit)s runnable jobs of one queue whose code this worker has.
-- Two bounded walks, each over a partial index holding live rows only (0010_queue_performance), so
-- finished rows and rows waiting for a later run_at cost the claim nothing: `ready` rows in claim
-- order (ultimate_jobs_job_ready), and `delayed`/`suspended` rows that are due, a range on run_at
-- (ultimate_jobs_job_due). Each walk locks with SKIP LOCKED so workers pass each other; the best
-- %(limit)s of both are claimed (a row locked by the other walk and not taken is free at commit).
-- The CTEs are optimisation fences so LIMIT bounds the UPDATE; a paused queue yields nothing.
-- Each claim gets a new fencing token.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
ready AS (
    SELECT c.id, c.priority, c.run_at FROM ultimate_jobs_job AS c
     WHERE c.queue = %(queue)s AND c.state = 'ready' AND c.run_at <= coalesce(%(now)s::timestamptz, now())
       AND c.name = ANY(%(names)b::text[])
       AND (c.tenant_id IS NULL OR NOT c.tenant_id = ANY(%(blocked)b::text[]))
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_queuepause AS p WHERE p.queue = %(queue)s)
     ORDER BY c.priority, c.run_at, c.id
     LIMIT %(limit)s
       FOR UPDATE OF c SKIP LOCKED),
due AS (
    SELECT d.id, d.priority, d.run_at FROM ultimate_jobs_job AS d
     WHERE d.queue = %(queue)s AND d.state IN ('delayed', 'suspended')
       AND d.run_at <= coalesce(%(now)s::timestamptz, now())  -- an index bound, not a join filter on t
       AND d.name = ANY(%(names)b::text[])
       AND (d.tenant_id IS NULL OR NOT d.tenant_id = ANY(%(blocked)b::text[]))
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_queuepause AS p WHERE p.queue = %(queue)s)
     ORDER BY d.run_at
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED),
picked AS (
    SELECT w.id FROM (SELECT r.id, r.priority, r.run_at FROM ready AS r
                      UNION ALL SELECT u.id, u.priority, u.run_at FROM due AS u) AS w
     ORDER BY w.priority, w.run_at, w.id
     LIMIT %(limit)s)
UPDATE ultimate_jobs_job AS j
   SET state = 'running', attempt = j.attempt + 1, claimed_by = %(worker_id)s, claim = gen_random_uuid(),
       visible_at = t.now + %(visibility)s * interval '1 second',
       started_at = coalesce(j.started_at, t.now), updated_at = t.now
  FROM picked, t
 WHERE j.id = picked.id
RETURNING j.id, j.run_id, j.name, j.queue, j.payload::text, j.attempt, j.max_attempts, j.claim,
          j.tenant_id, j.enqueued_by, j.priority, j.concurrency_key, j.traceparent, j.sensitive
"""

CLAIM_ONLY_COMMIT: LiteralString = "SET LOCAL synchronous_commit TO off"

# A worker's own pass that settles nothing sends its claims without a transaction block (see
# job_settle_and_claim): CLAIM_ONLY_COMMIT's setting is then made by the statement itself, local to
# the pass's implicit transaction, so the session keeps its own.
JOB_CLAIM_ALONE: LiteralString = JOB_CLAIM.replace(
    "WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),",
    "WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now,\n"
    "                  set_config('synchronous_commit', 'off', true) AS commit_mode),", 1)

# JOB_CLAIM runs on its prepared generic plan. Left to choose, PostgreSQL compares the generic
# plan's estimate with a custom plan's: with many `delayed` rows it guesses a third of them due
# (it cannot see the `now` parameter), finds the generic plan dear and plans the whole statement
# again on every claim, which every idle pickup then pays (docs/scaling.md). The walks are
# bounded by their indexes whatever the estimate, so the generic plan is the right one.
CLAIM_PLAN: LiteralString = "SET LOCAL plan_cache_mode TO force_generic_plan"
# The same for a worker's own pass, which has no transaction block to SET LOCAL in: sent first in
# the pass's pipeline, so it holds for the pass's implicit transaction (the claim's Bind, where the
# plan is chosen, comes after it) and ends with it. Never a session SET: behind a transaction-mode
# pooler the session is the next client's (docs/reference/settings.md, LISTEN_DATABASES).
CLAIM_PLAN_ALONE: LiteralString = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"

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
           -- last_error/error_code describe the current failure: a done job has none (its
           -- earlier failures stay in attempts); a retry or suspension keeps the last one.
           last_error = CASE WHEN v.state = 'done' THEN NULL ELSE coalesce(v.last_error, j.last_error) END,
           error_code = CASE WHEN v.state = 'done' THEN NULL ELSE coalesce(v.error_code, j.error_code) END,
           stop_reason = v.stop_reason,
           run_at = CASE WHEN v.state IN ('retry', 'ready', 'suspended')
                         THEN t.now + v.delay * interval '1 second' ELSE j.run_at END,
           visible_at = NULL,
           finished_at = CASE WHEN v.state IN """ + TERMINAL + """ THEN t.now END,
           attempts = CASE WHEN v.uncount = 1 THEN j.attempts ELSE """ + _ATTEMPT_APPEND.format(
               started_at="t.now - coalesce(v.elapsed, 0) * interval '1 second'",
               outcome="CASE v.state WHEN 'retry' THEN 'retried' ELSE v.state END",
               error_code="v.error_code", error="v.last_error") + """ END,
           updated_at = t.now
      FROM t, unnest(%(id)b::uuid[], %(claim)b::uuid[], %(state)b::text[], %(result)b::text[],
                     %(last_error)b::text[], %(error_code)b::text[], %(stop_reason)b::text[], %(delay)b::float8[],
                     %(uncount)b::int[], %(elapsed)b::float8[])
           AS v(id, claim, state, result, last_error, error_code, stop_reason, delay, uncount, elapsed)
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
           error_code = %(code)s::text,
           finished_at = CASE WHEN j.attempt < j.max_attempts THEN NULL ELSE t.now END,
           attempts = """ + _ATTEMPT_APPEND.format(
               started_at="NULL::timestamptz",
               outcome="""CASE WHEN j.attempt < j.max_attempts THEN 'retried'
                               WHEN j.name = ANY(%(no_dead_letter)b::text[]) THEN 'failed' ELSE 'dead' END""",
               error_code="%(code)s::text",
               error="'lease lapsed: worker ' || coalesce(j.claimed_by, '?') || ' died or stalled'") + """,
           run_at = t.now, visible_at = NULL, updated_at = t.now
      FROM lapsed, t
     WHERE j.id = lapsed.id AND j.claim IS NOT DISTINCT FROM lapsed.claim AND j.state = 'running'
    RETURNING j.id, j.name, j.queue, j.state,
              CASE j.state WHEN 'ready' THEN 'retried' ELSE j.state END AS outcome),
counted AS (""" + _COUNT_SETTLED + """)
SELECT id, name, queue, state FROM settled
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

JOB_PURGE_FINISHED: LiteralString = """
-- Delete one batch of finished jobs past their retention (done after done_retention; dead,
-- failed and cancelled after dead_retention), then the steps of runs left with no job. SKIP
-- LOCKED lets two purges share the work; the batch bounds each transaction. Both picks are ranges
-- of the finished index (state, finished_at), so a table of live rows costs the purge nothing. The
-- orphan check excludes `doomed` because a data-modifying CTE's siblings still see the deleted rows;
-- it asks for the run's jobs in the two places they are indexed (db/states.py RUN_FIRST, RUN_JOINED).
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
                        WHERE """ + RUN_FIRST.format(job="k", run="s.run_id") + """
                          AND k.id NOT IN (SELECT d.id FROM doomed AS d))
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_job AS k
                        WHERE """ + RUN_JOINED.format(job="k", run="s.run_id") + """
                          AND k.id NOT IN (SELECT d.id FROM doomed AS d))
    RETURNING s.id)
SELECT (SELECT count(*) FROM gone) AS jobs, (SELECT count(*) FROM steps) AS steps
"""

QUEUE_WAKE: LiteralString = """
-- Wake idle workers (or relays) of these queues at commit: an operator retried or promoted jobs
-- there, or a wake the enqueue's WAKE_WINDOW withheld is owed.
SELECT count(pg_notify(%(channel)s, q.queue)) FROM unnest(%(queues)b::text[]) AS q(queue)
"""


def _settlement_columns(s: Sequence[Settlement], now: datetime | None) -> dict[str, Any]:
    return {
        "id": [x.id for x in s], "claim": [x.claim for x in s], "state": [x.state for x in s],
        "result": [x.result for x in s], "last_error": [x.last_error for x in s],
        "error_code": [x.error_code for x in s], "stop_reason": [x.stop_reason for x in s],
        "delay": [x.delay for x in s], "uncount": [1 if x.uncount else 0 for x in s], "now": now,
        "elapsed": [x.elapsed for x in s], "kept": ATTEMPTS_KEPT, "error_chars": ATTEMPT_ERROR_CHARS,
    }


# Answers built by column name (the RETURNING / SELECT aliases), never by position.
_CLAIMED = kwargs_row(ClaimedJob)



class JobStatements(InsertStatements, PostgresConnection):
    """The ``job_*`` methods and ``queue_wake``."""

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
        and one commit for the whole pass.

        A worker's own pass (autocommit, on a connection whose preparation the store owns) sends its
        statements alone, pipelined into one implicit transaction that the pipeline's Sync commits:
        no BEGIN or COMMIT to send and answer; an idle pass that claims one queue is two statements
        in one round trip, the transaction-local plan setting and the claim (what each shape costs:
        docs/scaling.md). Inside the caller's ``atomic()``
        (begun or not yet: Django begins lazily) the pass is a savepoint of the caller's transaction:
        psycopg's ``transaction()`` would commit a transaction it found not yet begun, and the pass
        must not change how the caller's transaction commits.
        """
        import psycopg

        wrapper = self._connections[self.alias]
        prepare = self._prepare()
        with wrapper.wrap_database_errors:
            conn = self._connect(wrapper)
            own = bool(conn.autocommit)
            alone = own and bool(prepare) and self._idle(conn)
            # A pass that only claims does not wait for its WAL flush (an idle pickup's largest cost):
            # a claim lost to a server crash leaves its row as it was before the claim, so the job runs
            # again (at least once) and the worker's fenced settle matches nothing. Settles always
            # commit synchronously, and never in the caller's transaction is its commit changed.
            async_claim = own and not settlements
            settle_cursor = psycopg.Cursor(conn) if settlements else None
            claim_cursors = {queue: psycopg.Cursor(conn, row_factory=_CLAIMED) for queue in claims}
            with contextlib.ExitStack() as scope:
                if not alone:
                    scope.enter_context(conn.transaction() if own else transaction.atomic(using=self.alias))
                if not alone or claims or settlements:
                    scope.enter_context(conn.pipeline())
                if claims and alone:
                    conn.execute(CLAIM_PLAN_ALONE, prepare=prepare)  # in place of CLAIM_PLAN: no block
                if settle_cursor is not None:
                    settle_cursor.execute(JOB_SETTLE_MANY, _settlement_columns(settlements, now), prepare=prepare)
                if claims and not alone:
                    if async_claim:
                        conn.execute(CLAIM_ONLY_COMMIT)
                    conn.execute(CLAIM_PLAN)
                claim_sql = JOB_CLAIM_ALONE if alone and async_claim else JOB_CLAIM
                for queue, limit in claims.items():
                    claim_cursors[queue].execute(claim_sql, {
                        "queue": queue, "names": list(names), "limit": limit, "worker_id": worker_id,
                        "visibility": visibility, "now": now, "blocked": list(blocked_tenants)}, prepare=prepare)
            settled = {row[0] for row in settle_cursor.fetchall()} if settle_cursor is not None else set()
            claimed: dict[str, list[ClaimedJob]] = {q: c.fetchall() for q, c in claim_cursors.items()}
            for cursor in (settle_cursor, *claim_cursors.values()):
                if cursor is not None:
                    cursor.close()
        return SettledAndClaimed(settled=settled, claimed=claimed)

    @staticmethod
    def _idle(conn: Any) -> bool:
        """No transaction open on ``conn`` (not even one begun by hand in autocommit)."""
        return bool(conn.info.transaction_status == TransactionStatus.IDLE)

    def job_heartbeat(self, *, held: Sequence[tuple[UUID, UUID]], worker_id: str, visibility: float,
                      now: datetime | None) -> set[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_HEARTBEAT, {"id": [h[0] for h in held], "claim": [h[1] for h in held],
                                           "worker_id": worker_id, "visibility": visibility, "now": now},
                           prepare=self._prepare())
            return {row[0] for row in cursor.fetchall()}

    def job_release_unheld(self, *, worker_id: str, held: Sequence[UUID], now: datetime | None) -> list[UUID]:
        with self._cursor() as cursor:
            cursor.execute(JOB_RELEASE_UNHELD, {"worker_id": worker_id, "held": list(held), "now": now})
            return [row[0] for row in cursor.fetchall()]

    def job_rescue(self, *, now: datetime | None, names: Sequence[str], no_dead_letter: Sequence[str],
                   limit: int = 500) -> list[Rescued]:
        with self._cursor(kwargs_row(Rescued)) as cursor:
            cursor.execute(JOB_RESCUE, {"now": now, "limit": limit, "names": list(names), "code": X_LEASE_LAPSED,
                                        "no_dead_letter": list(no_dead_letter), "kept": ATTEMPTS_KEPT,
                                        "error_chars": ATTEMPT_ERROR_CHARS})
            return list(cursor.fetchall())

    def job_purge_finished(self, *, done_retention: float, dead_retention: float, limit: int,
                           now: datetime | None) -> Purged:
        with self._cursor(kwargs_row(Purged)) as cursor:
            cursor.execute(JOB_PURGE_FINISHED, {"done_retention": done_retention,
                                                "dead_retention": dead_retention, "limit": limit, "now": now})
            purged: Purged = cursor.fetchone()
        return purged

    def queue_wake(self, *, queues: Sequence[str], channel: str = JOBS_CHANNEL) -> None:
        if queues:
            with self._cursor() as cursor:
                cursor.execute(QUEUE_WAKE, {"queues": sorted(set(queues)), "channel": channel})
