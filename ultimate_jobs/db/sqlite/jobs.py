"""Internal: the job table's statements on SQLite: insert (the dedupe), claim, settle, heartbeat,
rescue, the lost claim's hand-back and purge."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString
from uuid import UUID

from ultimate_jobs import clock
from ultimate_jobs.db.sqlite.connection import SqliteConnection, as_uuid, named_rows, ts
from ultimate_jobs.db.sqlite.counters import count_events
from ultimate_jobs.db.states import LIVE, RUN_FIRST, RUN_JOINED, RUNNABLE
from ultimate_jobs.db.store import (
    ATTEMPT_ERROR_CHARS,
    ATTEMPTS_KEPT,
    JOBS_CHANNEL,
    ClaimedJob,
    Inserted,
    JobRow,
    Purged,
    Rescued,
    SettledAndClaimed,
    Settlement,
)
from ultimate_jobs.errors import X_LEASE_LAPSED
from ultimate_jobs.states import TERMINAL_STATES

JOB_INSERT_ROW: LiteralString = (
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, %s, %s, %s, %s)"
)

JOB_INSERT_MANY: LiteralString = """
-- Insert validated rows; a row whose live key is held already is skipped: that is the dedupe.
-- The conflict target repeats the live-key index exactly, expressions and predicate.
INSERT INTO ultimate_jobs_job (
    id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, enqueued_by,
    attempt, max_attempts, run_at, concurrency_key, traceparent, sensitive, created_at, updated_at)
VALUES {rows}
ON CONFLICT (name, COALESCE(tenant_id, ''), idempotency_key)
   WHERE state IN """ + LIVE + """ DO NOTHING
RETURNING id
"""

JOB_LIVE_BY_KEY: LiteralString = """
-- The live row holding one dedupe key: the same columns and states as the live-key index.
SELECT id, run_id FROM ultimate_jobs_job
 WHERE name = %s AND COALESCE(tenant_id, '') = %s AND idempotency_key = %s
   AND state IN """ + LIVE + """
"""

JOB_CLAIM: LiteralString = """
-- Claim up to the limit of runnable jobs of one queue whose code this worker has; one
-- statement, so SQLite's single writer makes it atomic. Each claim gets a new fencing token.
UPDATE ultimate_jobs_job
   SET state = 'running', attempt = attempt + 1, claimed_by = %s, claim = lower(hex(randomblob(16))),
       visible_at = %s, started_at = coalesce(started_at, %s), updated_at = %s
 WHERE id IN (
    SELECT id FROM ultimate_jobs_job
     WHERE queue = %s AND state IN """ + RUNNABLE + """ AND run_at <= %s
       AND name IN ({names}){blocked}
       AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_queuepause WHERE queue = %s)
     ORDER BY priority, run_at, id
     LIMIT %s)
RETURNING id, run_id, name, queue, payload, attempt, max_attempts, claim, tenant_id, enqueued_by,
          priority, concurrency_key, traceparent, sensitive
"""

# One entry of a row's attempt history (Job.attempts), appended by the statement that settles the
# attempt, the oldest dropped past ATTEMPTS_KEPT; the worker and attempt number come from the row.
_ATTEMPT_APPEND: LiteralString = """json_insert(
           CASE WHEN json_array_length(attempts) >= %s THEN json_remove(attempts, '$[0]') ELSE attempts END,
           '$[#]', json_object('attempt', attempt, 'worker', claimed_by, 'started_at', %s, 'finished_at', %s,
                               'outcome', %s, 'error_code', %s, 'error', %s))"""

JOB_SETTLE: LiteralString = """
-- Settle one finished attempt, fenced on the claim token and state = 'running'. A done job has no
-- current error (its earlier failures stay in attempts): the two CASE flags are 1 for done.
UPDATE ultimate_jobs_job
   SET state = %s, attempt = attempt - %s, result = coalesce(%s, result),
       last_error = CASE WHEN %s THEN NULL ELSE coalesce(%s, last_error) END,
       error_code = CASE WHEN %s THEN NULL ELSE coalesce(%s, error_code) END, stop_reason = %s,
       run_at = coalesce(%s, run_at), visible_at = NULL, finished_at = %s, updated_at = %s,
       attempts = CASE WHEN %s THEN attempts ELSE """ + _ATTEMPT_APPEND + """ END
 WHERE id = %s AND claim = %s AND state = 'running'
RETURNING name, queue
"""

JOB_HEARTBEAT: LiteralString = """
-- Renew one held lease, fenced on owner, claim token and state.
UPDATE ultimate_jobs_job SET visible_at = %s, updated_at = %s
 WHERE id = %s AND claim = %s AND state = 'running' AND claimed_by = %s
"""

JOB_RESCUE_READ: LiteralString = """
-- Running jobs whose lease lapsed, oldest lapse first, of the names registered in this process.
SELECT id, claim, name, queue, attempt, max_attempts, claimed_by FROM ultimate_jobs_job
 WHERE state = 'running' AND visible_at < %s AND name IN ({names}) ORDER BY visible_at LIMIT %s
"""

JOB_RESCUE: LiteralString = """
-- Hand back one lapsed job: a compare-and-set on the claim token read above.
UPDATE ultimate_jobs_job
   SET state = %s, stop_reason = %s, last_error = %s, error_code = %s, finished_at = %s,
       run_at = %s, visible_at = NULL, updated_at = %s, attempts = """ + _ATTEMPT_APPEND + """
 WHERE id = %s AND claim IS %s AND state = 'running'
"""

JOB_RELEASE_UNHELD: LiteralString = """
-- Hand back rows running under this worker's id that it does not hold (a claim whose answer was
-- lost). Uncounted: those bodies never ran.
UPDATE ultimate_jobs_job SET state = 'ready', attempt = attempt - 1, visible_at = NULL, run_at = %s, updated_at = %s
 WHERE state = 'running' AND claimed_by = %s{held}
RETURNING id
"""

JOB_PURGE_PICK: LiteralString = """
-- One batch of finished jobs past their retention: done after done_retention; dead, failed
-- and cancelled after dead_retention.
SELECT id, run_id FROM ultimate_jobs_job
 WHERE (state = 'done' AND finished_at < %s)
    OR (state IN ('dead', 'failed', 'cancelled') AND finished_at < %s)
 LIMIT %s
"""

JOB_PURGE_DELETE: LiteralString = "DELETE FROM ultimate_jobs_job WHERE id IN ({ids})"

JOB_STEP_PURGE_ORPHANS: LiteralString = """
-- The steps of the purged runs that no job row refers to any more.
DELETE FROM ultimate_jobs_jobstep
 WHERE run_id IN ({run_ids})
   AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_job AS k
                    WHERE """ + RUN_FIRST.format(job="k", run="ultimate_jobs_jobstep.run_id") + """)
   AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_job AS k
                    WHERE """ + RUN_JOINED.format(job="k", run="ultimate_jobs_jobstep.run_id") + """)
"""

_OUTCOMES = {"retry": "retried", "ready": "interrupted"}


def _entry(when: datetime, started: datetime | None, outcome: str, code: str | None, error: str | None) -> list[Any]:
    """The parameters of ``_ATTEMPT_APPEND`` (timestamps in the ISO form PostgreSQL's jsonb gives)."""
    if error is not None and len(error) > ATTEMPT_ERROR_CHARS:
        error = error[: ATTEMPT_ERROR_CHARS // 4] + "\n...\n" + error[-(ATTEMPT_ERROR_CHARS * 3 // 4):]
    return [ATTEMPTS_KEPT, started.isoformat() if started else None, when.isoformat(), outcome, code, error]


class JobStatements(SqliteConnection):
    """The ``job_*`` methods and ``queue_wake``."""

    insert_batch_rows = 1_000  # one INSERT statement's parameters

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[Inserted]:
        when = now or clock.now()
        stamp = ts(when)
        params: list[Any] = []
        for r in rows:
            run_at = r.run_at if r.run_at is not None else when + timedelta(seconds=r.delay)
            params += [r.id.hex, r.run_id.hex, r.name, r.queue, r.priority,
                       "delayed" if run_at > when else "ready", r.payload, r.idempotency_key, r.tenant_id,
                       r.enqueued_by, r.max_attempts, ts(run_at), r.concurrency_key, r.traceparent, r.sensitive,
                       stamp, stamp]
        answers: dict[tuple[str, str, str], Inserted] = {}
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(JOB_INSERT_MANY.format(rows=", ".join([JOB_INSERT_ROW] * len(rows))), params)
            inserted = {as_uuid(row[0]) for row in cursor.fetchall()}
            for r in rows:
                if r.id in inserted:
                    answers[r.dedupe_key] = Inserted(id=r.id, run_id=r.run_id, deduped=False)
                else:  # one writer: the live row that refused the insert is still there
                    cursor.execute(JOB_LIVE_BY_KEY, [r.name, r.tenant_id or "", r.idempotency_key])
                    job_id, run_id = cursor.fetchone()
                    answers[r.dedupe_key] = Inserted(id=as_uuid(job_id), run_id=as_uuid(run_id), deduped=True)
        return [answers[r.dedupe_key] for r in rows]

    def job_claim(self, *, queue: str, names: Sequence[str], limit: int, worker_id: str, visibility: float,
                  now: datetime | None, blocked_tenants: Sequence[str] = ()) -> list[ClaimedJob]:
        if not names:
            return []
        when = now or clock.now()
        stamp = ts(when)
        marks = ", ".join(["%s"] * len(blocked_tenants))
        blocked = f"\n       AND (tenant_id IS NULL OR tenant_id NOT IN ({marks}))" if blocked_tenants else ""
        sql = JOB_CLAIM.format(names=", ".join(["%s"] * len(names)), blocked=blocked)
        params = [worker_id, ts(when + timedelta(seconds=visibility)), stamp, stamp, queue, stamp, *names,
                  *blocked_tenants, queue, limit]
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            rows = named_rows(cursor)
        claimed = [ClaimedJob(**{**r, "id": as_uuid(r["id"]), "run_id": as_uuid(r["run_id"]),
                                 "claim": as_uuid(r["claim"]), "sensitive": bool(r["sensitive"])}) for r in rows]
        claimed.sort(key=lambda c: c.priority)
        return claimed

    def job_settle_many(self, *, settlements: Sequence[Settlement], now: datetime | None) -> set[UUID]:
        when = now or clock.now()
        stamp = ts(when)
        settled: set[UUID] = set()
        events: list[tuple[str, str, str]] = []
        with self._atomic(), self._cursor() as cursor:
            for s in settlements:
                state = s.state
                if state == "retry":
                    state = "delayed" if s.delay > 0 else "ready"
                run_at = ts(when + timedelta(seconds=s.delay)) if s.state in ("retry", "ready", "suspended") else None
                done = 1 if state == "done" else 0
                cursor.execute(JOB_SETTLE, [state, 1 if s.uncount else 0, s.result, done, s.last_error, done,
                                            s.error_code, s.stop_reason, run_at,
                                            stamp if state in TERMINAL_STATES else None, stamp,
                                            s.uncount, *_entry(when, when - timedelta(seconds=s.elapsed or 0),
                                                               _OUTCOMES.get(s.state, s.state), s.error_code,
                                                               s.last_error),
                                            s.id.hex, s.claim.hex])
                row = cursor.fetchone()
                if row is not None:
                    settled.add(s.id)
                    events.append((row[0], row[1], _OUTCOMES.get(s.state, s.state)))
            count_events(cursor, events, when)
        return settled

    def job_settle_and_claim(self, *, settlements: Sequence[Settlement], claims: dict[str, int],
                             names: Sequence[str], worker_id: str, visibility: float,
                             now: datetime | None, blocked_tenants: Sequence[str] = (),
                             ) -> SettledAndClaimed:
        """Settle, then claim per queue, in one transaction."""
        with self._atomic():
            settled = self.job_settle_many(settlements=settlements, now=now) if settlements else set()
            claimed = {queue: self.job_claim(queue=queue, names=names, limit=limit, worker_id=worker_id,
                                             visibility=visibility, now=now, blocked_tenants=blocked_tenants)
                       for queue, limit in claims.items()}
        return SettledAndClaimed(settled=settled, claimed=claimed)

    def job_heartbeat(self, *, held: Sequence[tuple[UUID, UUID]], worker_id: str, visibility: float,
                      now: datetime | None) -> set[UUID]:
        when = now or clock.now()
        renewed: set[UUID] = set()
        with self._atomic(), self._cursor() as cursor:
            for job_id, claim in held:
                cursor.execute(JOB_HEARTBEAT, [ts(when + timedelta(seconds=visibility)), ts(when), job_id.hex,
                                               claim.hex, worker_id])
                if cursor.rowcount == 1:
                    renewed.add(job_id)
        return renewed

    def job_release_unheld(self, *, worker_id: str, held: Sequence[UUID], now: datetime | None) -> list[UUID]:
        stamp = ts(now or clock.now())
        clause = " AND id NOT IN ({})".format(", ".join(["%s"] * len(held))) if held else ""
        with self._cursor() as cursor:
            cursor.execute(JOB_RELEASE_UNHELD.format(held=clause), [stamp, stamp, worker_id, *(h.hex for h in held)])
            return [as_uuid(row[0]) for row in cursor.fetchall()]

    def job_rescue(self, *, now: datetime | None, names: Sequence[str], no_dead_letter: Sequence[str],
                   limit: int = 500) -> list[Rescued]:
        if not names:
            return []
        when = now or clock.now()
        stamp = ts(when)
        rescued: list[Rescued] = []
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(JOB_RESCUE_READ.format(names=", ".join(["%s"] * len(names))), [stamp, *names, limit])
            for job_id, claim, name, queue, attempt, max_attempts, claimed_by in cursor.fetchall():
                final = attempt >= max_attempts
                state = ("failed" if name in no_dead_letter else "dead") if final else "ready"
                error = (f"lease lapsed on the final attempt (worker {claimed_by} died or stalled)" if final
                         else f"lease lapsed: worker {claimed_by} died or stalled")
                cursor.execute(JOB_RESCUE, [state, "lease-lapsed" if final else None, error, X_LEASE_LAPSED,
                                            stamp if final else None, stamp, stamp,
                                            *_entry(when, None, "retried" if state == "ready" else state,
                                                    X_LEASE_LAPSED,
                                                    f"lease lapsed: worker {claimed_by} died or stalled"),
                                            job_id, claim])
                if cursor.rowcount == 1:
                    rescued.append(Rescued(id=as_uuid(job_id), name=name, queue=queue, state=state))
            count_events(cursor, [(r.name, r.queue, "retried" if r.state == "ready" else r.state) for r in rescued],
                         when)
        return rescued

    def job_purge_finished(self, *, done_retention: float, dead_retention: float, limit: int,
                           now: datetime | None) -> Purged:
        when = now or clock.now()
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(JOB_PURGE_PICK, [ts(when - timedelta(seconds=done_retention)),
                                            ts(when - timedelta(seconds=dead_retention)), limit])
            picked = cursor.fetchall()
            if not picked:
                return Purged(jobs=0, steps=0)
            ids, run_ids = [row[0] for row in picked], sorted({row[1] for row in picked})
            cursor.execute(JOB_PURGE_DELETE.format(ids=", ".join(["%s"] * len(ids))), ids)
            jobs = cursor.rowcount
            cursor.execute(JOB_STEP_PURGE_ORPHANS.format(run_ids=", ".join(["%s"] * len(run_ids))), run_ids)
            return Purged(jobs=jobs, steps=cursor.rowcount)

    def queue_wake(self, *, queues: Sequence[str], channel: str = JOBS_CHANNEL) -> None:
        """SQLite workers poll: nothing to send."""
