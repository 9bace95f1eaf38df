"""Internal: the durable runs' statements on PostgreSQL: steps, events, progress, the waiter's re-check."""

from __future__ import annotations

from datetime import datetime
from typing import LiteralString
from uuid import UUID

from psycopg.rows import kwargs_row

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.states import RUN_FIRST, RUN_JOINED
from ultimate_jobs.db.store import (
    ALREADY_COMPLETED,
    FENCED_OUT,
    JOBS_CHANNEL,
    WRITTEN,
    StepRow,
    StepWrite,
)

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
    INSERT INTO ultimate_jobs_jobevent (id, name, payload, tenant_id, published_at)
    SELECT %(id)s, %(name)s, %(payload)s::jsonb, %(tenant_id)s::text, t.now FROM t
    RETURNING payload, tenant_id, published_at),
woken AS (
    UPDATE ultimate_jobs_job AS j SET run_at = t.now, updated_at = t.now
      FROM t, ev, ultimate_jobs_jobstep AS s
     WHERE s.event = %(name)s AND s.status = 'started' AND s.started_at <= ev.published_at
       AND ev.payload @> coalesce(s.event_match, '{}'::jsonb)
       AND (""" + RUN_FIRST.format(job="j", run="s.run_id") + " OR " + RUN_JOINED.format(job="j", run="s.run_id") + """)
       AND j.state = 'suspended' AND j.run_at > t.now
       AND j.tenant_id IS NOT DISTINCT FROM ev.tenant_id  -- events are tenant-scoped
    RETURNING j.queue),
notified AS (SELECT pg_notify('""" + JOBS_CHANNEL + """', q.queue) FROM (SELECT DISTINCT queue FROM woken) AS q)
SELECT (SELECT count(*) FROM woken)::int, (SELECT count(*) FROM notified)::int
"""

EVENT_FIND: LiteralString = """
-- The first event of one name published since a wait began whose payload contains the wait's
-- match (jsonb containment), published under the waiting run's tenant: the answer the wait records.
SELECT e.payload::text FROM ultimate_jobs_jobevent AS e
 WHERE e.name = %(name)s AND e.published_at >= %(since)s::timestamptz
   AND e.tenant_id IS NOT DISTINCT FROM %(tenant_id)s::text
   AND e.payload @> coalesce(%(match)s::jsonb, '{}'::jsonb)
 ORDER BY e.published_at, e.id
 LIMIT 1
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
                          AND e.tenant_id IS NOT DISTINCT FROM j.tenant_id
                    WHERE s.run_id = j.run_id AND s.status = 'started' AND s.event IS NOT NULL
                      AND e.payload @> coalesce(s.event_match, '{}'::jsonb))
    RETURNING j.queue)
SELECT count(*)::int, (SELECT count(*) FROM (SELECT pg_notify('""" + JOBS_CHANNEL + """', queue) FROM woken) AS n)::int
  FROM woken
"""


class RunStatements(PostgresConnection):
    """The ``step_*`` and ``event_*`` methods, ``job_progress`` and ``job_wake_waiter``."""

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

    def event_publish(self, *, event_id: UUID, name: str, payload: str, tenant_id: str | None,
                      now: datetime | None) -> int:
        """Store the event on the caller's connection (its transaction); answer how many runs it woke."""
        with self._cursor() as cursor:
            cursor.execute(EVENT_PUBLISH, {"id": event_id, "name": name, "payload": payload, "tenant_id": tenant_id,
                                           "now": now})
            return int(cursor.fetchone()[0])

    def event_find(self, *, name: str, match: str | None, since: datetime, tenant_id: str | None) -> str | None:
        with self._cursor() as cursor:
            cursor.execute(EVENT_FIND, {"name": name, "match": match, "since": since, "tenant_id": tenant_id})
            row = cursor.fetchone()
        return None if row is None else row[0]

    def event_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        """Delete one batch of events past ``retention`` that no open wait could match; answer how many."""
        with self._cursor() as cursor:
            cursor.execute(EVENT_PURGE, {"retention": retention, "now": now, "limit": limit})
            return int(cursor.rowcount)

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
