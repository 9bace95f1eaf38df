"""Internal: the durable runs' statements on SQLite: steps, events, progress, the waiter's re-check."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, LiteralString
from uuid import UUID

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.db.sqlite.connection import SqliteConnection, parse_ts, ts
from ultimate_jobs.db.store import (
    ALREADY_COMPLETED,
    FENCED_OUT,
    WRITTEN,
    StepRow,
    StepWrite,
)

EVENT_PURGE: LiteralString = """
-- Delete up to the limit of events published longer than the retention ago that no open wait
-- could still be answered by (an open wait on the name, begun no later than the publish; its
-- match is not consulted, so this errs on keeping).
DELETE FROM ultimate_jobs_jobevent
 WHERE id IN (
    SELECT e.id FROM ultimate_jobs_jobevent AS e
     WHERE e.published_at < %s
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_jobstep AS s
                        WHERE s.event = e.name AND s.status = 'started' AND s.started_at <= e.published_at)
     LIMIT %s)
"""

# -- durable runs ---------------------------------------------------------------------------------

STEP_LIST: LiteralString = """
-- Every step of one run in execution order: the one read a replay starts from.
SELECT name, status, output, executions, seq, started_at, wake_at, event, event_match
  FROM ultimate_jobs_jobstep WHERE run_id = %s ORDER BY seq, id
"""

STEP_BEGIN: LiteralString = """
-- Persist a step's start (a once=True step's "started", a sleep's wake time, an event wait's
-- window). Fenced in the statement: no row is inserted unless the job still runs under this
-- claim; an existing row is never overwritten.
INSERT INTO ultimate_jobs_jobstep (
    run_id, name, status, output, error, executions, seq, started_at, completed_at, wake_at, event, event_match)
SELECT %s, %s, 'started', NULL, NULL, 1, %s, %s, NULL, %s, %s, %s
  FROM ultimate_jobs_job WHERE id = %s AND claim = %s AND state = 'running'
ON CONFLICT (run_id, name) DO NOTHING
"""

STEP_COMPLETE: LiteralString = """
-- Checkpoint a step's JSON output; never overwrites a completed row. Fenced in the statement.
INSERT INTO ultimate_jobs_jobstep (run_id, name, status, output, error, executions, seq, started_at, completed_at)
SELECT %s, %s, 'completed', %s, NULL, %s, %s, %s, %s
  FROM ultimate_jobs_job WHERE id = %s AND claim = %s AND state = 'running'
ON CONFLICT (run_id, name) DO UPDATE
   SET status = 'completed', output = excluded.output, error = NULL,
       executions = executions + excluded.executions, completed_at = excluded.completed_at
 WHERE status <> 'completed'
"""

STEP_FAIL: LiteralString = """
-- Record a failed execution of a step, unless it completed. Fenced in the statement.
INSERT INTO ultimate_jobs_jobstep (run_id, name, status, output, error, executions, seq, started_at)
SELECT %s, %s, 'failed', NULL, %s, %s, %s, %s
  FROM ultimate_jobs_job WHERE id = %s AND claim = %s AND state = 'running'
ON CONFLICT (run_id, name) DO UPDATE
   SET status = 'failed', error = excluded.error, executions = executions + excluded.executions
 WHERE status <> 'completed'
"""

JOB_FENCE: LiteralString = """
-- Whether a job still runs under a claim: read only after a fenced write wrote nothing, to tell
-- a lost run from a step that completed already.
SELECT 1 FROM ultimate_jobs_job WHERE id = %s AND claim = %s AND state = 'running'
"""

EVENT_INSERT: LiteralString = """
-- Store one event on the caller's connection, so it commits or rolls back with the caller.
INSERT INTO ultimate_jobs_jobevent (id, name, payload, tenant_id, published_at) VALUES (%s, %s, %s, %s, %s)
"""

EVENT_WAITERS: LiteralString = """
-- The suspended runs of the event's tenant (IS: NULL matches only NULL) with an open wait on one
-- event name begun no later than the publish; the match is tested in Python (SQLite has no JSON
-- containment).
SELECT j.id, s.event_match FROM ultimate_jobs_jobstep AS s
  JOIN ultimate_jobs_job AS j ON j.run_id = s.run_id
 WHERE s.event = %s AND s.status = 'started' AND s.started_at <= %s
   AND j.state = 'suspended' AND j.run_at > %s AND j.tenant_id IS %s
"""

JOB_WAKE: LiteralString = """
-- Make one suspended run due now (a compare on state: a re-claimed row is untouched).
UPDATE ultimate_jobs_job SET run_at = %s, updated_at = %s WHERE id = %s AND state = 'suspended' AND run_at > %s
"""

EVENT_SINCE: LiteralString = """
-- The events of one name and one tenant (IS: NULL matches only NULL) published since a wait
-- began, oldest first; the first whose payload contains the wait's match is its answer.
SELECT payload FROM ultimate_jobs_jobevent
 WHERE name = %s AND published_at >= %s AND tenant_id IS %s
 ORDER BY published_at, id
"""

JOB_OPEN_WAIT: LiteralString = """
-- A suspended run's open event wait, for the re-check after it settled.
SELECT s.event, s.event_match, s.started_at, j.tenant_id FROM ultimate_jobs_jobstep AS s
  JOIN ultimate_jobs_job AS j ON j.run_id = s.run_id
 WHERE j.id = %s AND j.state = 'suspended' AND s.status = 'started' AND s.event IS NOT NULL
"""

JOB_PROGRESS: LiteralString = """
-- Record a run's progress; fenced on the claim token and state.
UPDATE ultimate_jobs_job SET progress = %s WHERE id = %s AND claim = %s AND state = 'running'
"""


class RunStatements(SqliteConnection):
    """The ``step_*`` and ``event_*`` methods, ``job_progress`` and ``job_wake_waiter``."""

    def step_list(self, *, run_id: UUID, now: datetime | None) -> list[StepRow]:
        when = now or clock.now()
        with self._cursor() as cursor:
            cursor.execute(STEP_LIST, [run_id.hex])
            rows = cursor.fetchall()
        steps = []
        for name, status, output, executions, seq, started_at, wake_at, event, event_match in rows:
            wake = parse_ts(wake_at)
            remaining = None if wake is None else (wake - when).total_seconds()
            steps.append(StepRow(name=name, status=status, output=output, executions=executions, seq=seq,
                                 started_at=parse_ts(started_at), wake_at=wake, remaining=remaining, event=event,
                                 event_match=event_match))
        return steps

    def step_begin(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, wake_in: float | None,
                   event: str | None, event_match: str | None, now: datetime | None) -> datetime | None:
        when = now or clock.now()
        wake_at = None if wake_in is None else ts(when + timedelta(seconds=wake_in))
        with self._cursor() as cursor:
            cursor.execute(STEP_BEGIN, [run_id.hex, name, seq, ts(when), wake_at, event, event_match, job_id.hex,
                                        claim.hex])
            return when if cursor.rowcount == 1 else None

    def _fenced_write(self, sql: str, params: list[Any], job_id: UUID, claim: UUID) -> StepWrite:
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.rowcount == 1:
                return WRITTEN
            cursor.execute(JOB_FENCE, [job_id.hex, claim.hex])
            return ALREADY_COMPLETED if cursor.fetchone() is not None else FENCED_OUT

    def step_complete(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, output: str,
                      count: bool, now: datetime | None) -> StepWrite:
        stamp = ts(now or clock.now())
        return self._fenced_write(STEP_COMPLETE, [run_id.hex, name, output, 1 if count else 0, seq, stamp, stamp,
                                                  job_id.hex, claim.hex], job_id, claim)

    def step_fail(self, *, job_id: UUID, claim: UUID, run_id: UUID, name: str, seq: int, error: str, count: bool,
                  now: datetime | None) -> StepWrite:
        stamp = ts(now or clock.now())
        return self._fenced_write(STEP_FAIL, [run_id.hex, name, error, 1 if count else 0, seq, stamp, job_id.hex,
                                              claim.hex], job_id, claim)

    def event_publish(self, *, event_id: UUID, name: str, payload: str, tenant_id: str | None,
                      now: datetime | None) -> int:
        """Store the event and wake its waiters, on the caller's connection (its transaction)."""
        stamp = ts(now or clock.now())
        document = jsoncodec.loads(payload)
        woken = 0
        with self._cursor() as cursor:
            cursor.execute(EVENT_INSERT, [event_id.hex, name, payload, tenant_id, stamp])
            cursor.execute(EVENT_WAITERS, [name, stamp, stamp, tenant_id])
            for job_id, match in cursor.fetchall():
                if match is None or jsoncodec.contains(document, jsoncodec.loads(match)):
                    cursor.execute(JOB_WAKE, [stamp, stamp, job_id, stamp])
                    woken += cursor.rowcount
        return woken

    def event_find(self, *, name: str, match: str | None, since: datetime, tenant_id: str | None) -> str | None:
        wanted = None if match is None else jsoncodec.loads(match)
        with self._cursor() as cursor:
            cursor.execute(EVENT_SINCE, [name, ts(since), tenant_id])
            for (payload,) in cursor.fetchall():
                if wanted is None or jsoncodec.contains(jsoncodec.loads(payload), wanted):
                    return str(payload)
        return None

    def event_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        """Delete one batch of events past ``retention`` that no open wait could match; answer how many."""
        with self._cursor() as cursor:
            cursor.execute(EVENT_PURGE, [ts((now or clock.now()) - timedelta(seconds=retention)), limit])
            return int(cursor.rowcount)

    def job_progress(self, *, job_id: UUID, claim: UUID, progress: str, now: datetime | None) -> bool:
        with self._cursor() as cursor:
            cursor.execute(JOB_PROGRESS, [progress, job_id.hex, claim.hex])
            return bool(cursor.rowcount == 1)

    def job_wake_waiter(self, *, job_id: UUID, now: datetime | None) -> bool:
        stamp = ts(now or clock.now())
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(JOB_OPEN_WAIT, [job_id.hex])
            row = cursor.fetchone()
            if row is None:
                return False
            event, match, started_at, tenant_id = row
            if self.event_find(name=event, match=match, since=parse_ts(started_at) or clock.now(),
                               tenant_id=tenant_id) is None:
                return False
            cursor.execute(JOB_WAKE, [stamp, stamp, job_id.hex, stamp])
            return bool(cursor.rowcount == 1)
