"""Internal: the SQLite store: the same operations as ``db/postgres.py`` for one writer.

SQLite has no server clock shared by processes, no ``SKIP LOCKED`` and no ``LISTEN``: time is
the process clock (frozen in tests), a claim is one ``UPDATE ... WHERE id IN (SELECT ... LIMIT)``
(SQLite runs one writer at a time, so no two workers can claim one row), and workers poll.
Values are stored the way Django's SQLite backend stores them: UUIDs as 32 hex digits,
timestamps as naive UTC text, JSON as text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString
from uuid import UUID

from ultimate_jobs import clock, jsoncodec
from ultimate_jobs.db.states import LIVE, RUNNABLE
from ultimate_jobs.db.store import (
    ALREADY_COMPLETED,
    FENCED_OUT,
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
from ultimate_jobs.models.jobs import TERMINAL_STATES

JOB_INSERT_ROW: LiteralString = (
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, %s, %s, %s)"
)

JOB_INSERT_MANY: LiteralString = """
-- Insert validated rows; a row whose live key is held already is skipped: that is the dedupe.
-- The conflict target repeats the live-key index exactly, expressions and predicate.
INSERT INTO ultimate_jobs_job (
    id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, enqueued_by,
    attempt, max_attempts, run_at, concurrency_key, traceparent, created_at, updated_at)
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
          priority, concurrency_key, traceparent
"""

JOB_SETTLE: LiteralString = """
-- Settle one finished attempt, fenced on the claim token and state = 'running'.
UPDATE ultimate_jobs_job
   SET state = %s, attempt = attempt - %s, result = coalesce(%s, result),
       last_error = coalesce(%s, last_error), error_code = coalesce(%s, error_code), stop_reason = %s,
       run_at = coalesce(%s, run_at), visible_at = NULL, finished_at = %s, updated_at = %s
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
   SET state = %s, stop_reason = %s, last_error = %s, error_code = 'X_LEASE_LAPSED', finished_at = %s,
       run_at = %s, visible_at = NULL, updated_at = %s
 WHERE id = %s AND claim IS %s AND state = 'running'
"""

LEASE_READ: LiteralString = """
-- The slots of one concurrency key, to pick a free one (one writer: nobody takes it meanwhile).
SELECT slot, job_id, expires_at FROM ultimate_jobs_joblease WHERE lease_key = %s
"""

LEASE_TAKE: LiteralString = """
-- Take one slot: insert it, or take over an expired row or this job's own leftover.
INSERT INTO ultimate_jobs_joblease (lease_key, slot, holder, job_id, expires_at) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (lease_key, slot) DO UPDATE
   SET holder = excluded.holder, job_id = excluded.job_id, expires_at = excluded.expires_at
 WHERE ultimate_jobs_joblease.expires_at <= %s OR ultimate_jobs_joblease.job_id = excluded.job_id
"""

LEASE_RENEW: LiteralString = """
-- Renew one held slot, fenced on holder, job and a lease that has not expired.
UPDATE ultimate_jobs_joblease SET expires_at = %s
 WHERE lease_key = %s AND slot = %s AND job_id = %s AND holder = %s AND expires_at > %s
"""

LEASE_RELEASE: LiteralString = """
-- Hand one slot back, fenced on holder and job.
DELETE FROM ultimate_jobs_joblease WHERE lease_key = %s AND slot = %s AND holder = %s AND job_id = %s
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
   AND NOT EXISTS (SELECT 1 FROM ultimate_jobs_job AS k WHERE k.run_id = ultimate_jobs_jobstep.run_id)
"""

COUNTER_ADD: LiteralString = """
-- Add to one outcome counter row (one tier's bucket, or the all-time row with width 0). Called
-- inside the settling transaction, so a count never disagrees with a settle that rolled back.
INSERT INTO ultimate_jobs_jobcounter (name, queue, outcome, width, bucket, shard, count)
VALUES (%s, %s, %s, %s, %s, 0, %s)
ON CONFLICT (name, queue, outcome, width, bucket, shard)
DO UPDATE SET count = ultimate_jobs_jobcounter.count + excluded.count
"""

_WIDTHS = (0, 60)  # the all-time row and the minute bucket; coarser tiers are folded later
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

COUNTER_FOLD_READ: LiteralString = """
-- The 1-minute counter buckets old enough to fold into the coarser tiers.
SELECT name, queue, outcome, bucket, shard, count FROM ultimate_jobs_jobcounter WHERE width = 60 AND bucket < %s
"""

COUNTER_FOLD_DELETE: LiteralString = """
-- Drop the minute buckets just folded (same transaction, one writer: each is folded once).
DELETE FROM ultimate_jobs_jobcounter WHERE width = 60 AND bucket < %s
"""

COUNTER_FOLD_ADD: LiteralString = """
-- Add folded minutes to one coarser bucket.
INSERT INTO ultimate_jobs_jobcounter (name, queue, outcome, width, bucket, shard, count)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (name, queue, outcome, width, bucket, shard)
DO UPDATE SET count = ultimate_jobs_jobcounter.count + excluded.count
"""
_OUTCOMES = {"retry": "retried", "ready": "interrupted"}

OUTBOX_STAGE_ROW: LiteralString = "(%s, NULL, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"

OUTBOX_STAGE_MANY: LiteralString = """
-- Stage validated enqueues in the caller's transaction: its commit is the enqueue, its rollback
-- means the job never existed. run_at is fixed here, so a delay counts from the enqueue. txid
-- stays NULL: SQLite names no transaction, so all rows form one group, published in one order.
INSERT INTO ultimate_jobs_outboxentry (
    id, txid, staged_at, run_id, name, queue, priority, payload, idempotency_key, tenant_id,
    enqueued_by, max_attempts, run_at, concurrency_key, traceparent)
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
          run_at, concurrency_key, traceparent, staged_at
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
INSERT INTO ultimate_jobs_jobevent (id, name, payload, published_at) VALUES (%s, %s, %s, %s)
"""

EVENT_WAITERS: LiteralString = """
-- The suspended runs with an open wait on one event name begun no later than the publish; the
-- match is tested in Python (SQLite has no JSON containment).
SELECT j.id, s.event_match FROM ultimate_jobs_jobstep AS s
  JOIN ultimate_jobs_job AS j ON j.run_id = s.run_id
 WHERE s.event = %s AND s.status = 'started' AND s.started_at <= %s
   AND j.state = 'suspended' AND j.run_at > %s
"""

JOB_WAKE: LiteralString = """
-- Make one suspended run due now (a compare on state: a re-claimed row is untouched).
UPDATE ultimate_jobs_job SET run_at = %s, updated_at = %s WHERE id = %s AND state = 'suspended' AND run_at > %s
"""

EVENT_SINCE: LiteralString = """
-- The events of one name published since a wait began, oldest first; the first whose payload
-- contains the wait's match is its answer.
SELECT payload FROM ultimate_jobs_jobevent WHERE name = %s AND published_at >= %s ORDER BY published_at, id
"""

JOB_OPEN_WAIT: LiteralString = """
-- A suspended run's open event wait, for the re-check after it settled.
SELECT s.event, s.event_match, s.started_at FROM ultimate_jobs_jobstep AS s
  JOIN ultimate_jobs_job AS j ON j.run_id = s.run_id
 WHERE j.id = %s AND j.state = 'suspended' AND s.status = 'started' AND s.event IS NOT NULL
"""

JOB_PROGRESS: LiteralString = """
-- Record a run's progress; fenced on the claim token and state.
UPDATE ultimate_jobs_job SET progress = %s WHERE id = %s AND claim = %s AND state = 'running'
"""

JOB_RELEASE_UNHELD: LiteralString = """
-- Hand back rows running under this worker's id that it does not hold (a claim whose answer was
-- lost). Uncounted: those bodies never ran.
UPDATE ultimate_jobs_job SET state = 'ready', attempt = attempt - 1, visible_at = NULL, run_at = %s, updated_at = %s
 WHERE state = 'running' AND claimed_by = %s{held}
RETURNING id
"""



def _bucket(when: datetime, width: int) -> str | None:
    if width == 0:
        return ts(_EPOCH)
    epoch = int(when.timestamp())
    return ts(datetime.fromtimestamp(epoch - epoch % width, UTC))


def _count(cursor: Any, events: Sequence[tuple[str, str, str]], when: datetime) -> None:
    """Add ``(name, queue, outcome)`` events to the minute bucket and the all-time row."""
    tally: dict[tuple[str, str, str], int] = {}
    for event in events:
        tally[event] = tally.get(event, 0) + 1
    for (name, queue, outcome), n in sorted(tally.items()):
        for width in _WIDTHS:
            cursor.execute(COUNTER_ADD, [name, queue, outcome, width, _bucket(when, width), n])


def ts(value: datetime | None) -> str | None:
    """A timestamp as Django's SQLite backend stores it: naive UTC text with microseconds."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _text_ts(value: str | datetime) -> str:
    """A stored timestamp as comparable text (Django's converters may hand back a naive UTC datetime)."""
    if isinstance(value, datetime):
        return ts(value if value.tzinfo else value.replace(tzinfo=UTC)) or ""
    return value


def _parse_ts(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def _named(cursor: Any) -> list[dict[str, Any]]:
    """The answer rows by column name (the RETURNING / SELECT names), never read by position."""
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def _aware(value: Any) -> datetime:
    """A timestamp read back from raw SQL (naive UTC text) as an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


class SqliteStore:
    """The store over a Django SQLite connection alias."""

    supports_listen_notify = False

    def __init__(self, alias: str) -> None:
        from django.db import connections

        self.alias = alias
        self._connections = connections

    def _cursor(self) -> Any:
        return self._connections[self.alias].cursor()

    def _atomic(self) -> Any:
        from django.db import transaction

        return transaction.atomic(using=self.alias)

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[Inserted]:
        when = now or clock.now()
        stamp = ts(when)
        params: list[Any] = []
        for r in rows:
            run_at = r.run_at if r.run_at is not None else when + timedelta(seconds=r.delay)
            params += [r.id.hex, r.run_id.hex, r.name, r.queue, r.priority,
                       "delayed" if run_at > when else "ready", r.payload, r.idempotency_key, r.tenant_id,
                       r.enqueued_by, r.max_attempts, ts(run_at), r.concurrency_key, r.traceparent, stamp, stamp]
        answers: dict[tuple[str, str, str], Inserted] = {}
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(JOB_INSERT_MANY.format(rows=", ".join([JOB_INSERT_ROW] * len(rows))), params)
            inserted = {_uuid(row[0]) for row in cursor.fetchall()}
            for r in rows:
                if r.id in inserted:
                    answers[r.dedupe_key] = Inserted(id=r.id, run_id=r.run_id, deduped=False)
                else:  # one writer: the live row that refused the insert is still there
                    cursor.execute(JOB_LIVE_BY_KEY, [r.name, r.tenant_id or "", r.idempotency_key])
                    job_id, run_id = cursor.fetchone()
                    answers[r.dedupe_key] = Inserted(id=_uuid(job_id), run_id=_uuid(run_id), deduped=True)
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
            rows = _named(cursor)
        claimed = [ClaimedJob(**{**r, "id": _uuid(r["id"]), "run_id": _uuid(r["run_id"]), "claim": _uuid(r["claim"])})
                   for r in rows]
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
                cursor.execute(JOB_SETTLE, [state, 1 if s.uncount else 0, s.result, s.last_error, s.error_code,
                                            s.stop_reason, run_at, stamp if state in TERMINAL_STATES else None, stamp,
                                            s.id.hex, s.claim.hex])
                row = cursor.fetchone()
                if row is not None:
                    settled.add(s.id)
                    events.append((row[0], row[1], _OUTCOMES.get(s.state, s.state)))
            _count(cursor, events, when)
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

    def lease_acquire(self, *, key: str, limit: int, job_id: UUID, holder: str, ttl: float,
                      now: datetime | None) -> int | None:
        when = now or clock.now()
        stamp = ts(when)
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(LEASE_READ, [key])
            busy, own = set(), None
            for slot, holder_job, expires_at in cursor.fetchall():
                if _uuid(holder_job) == job_id:
                    own = slot
                elif _text_ts(expires_at) > stamp:
                    busy.add(slot)
            free = [s for s in range(limit) if s not in busy]
            if own is not None and own < limit:
                free.insert(0, own)
            if not free:
                return None
            cursor.execute(LEASE_TAKE, [key, free[0], holder, job_id.hex, ts(when + timedelta(seconds=ttl)), stamp])
            return int(free[0]) if cursor.rowcount == 1 else None

    def lease_renew(self, *, held: Sequence[tuple[str, int, UUID]], holder: str, ttl: float,
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

    def lease_release(self, *, key: str, slot: int, job_id: UUID, holder: str) -> None:
        with self._cursor() as cursor:
            cursor.execute(LEASE_RELEASE, [key, slot, holder, job_id.hex])

    def job_release_unheld(self, *, worker_id: str, held: Sequence[UUID], now: datetime | None) -> list[UUID]:
        stamp = ts(now or clock.now())
        clause = " AND id NOT IN ({})".format(", ".join(["%s"] * len(held))) if held else ""
        with self._cursor() as cursor:
            cursor.execute(JOB_RELEASE_UNHELD.format(held=clause), [stamp, stamp, worker_id, *(h.hex for h in held)])
            return [_uuid(row[0]) for row in cursor.fetchall()]

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
                cursor.execute(JOB_RESCUE, [state, "lease-lapsed" if final else None, error,
                                            stamp if final else None, stamp, stamp, job_id, claim])
                if cursor.rowcount == 1:
                    rescued.append(Rescued(id=_uuid(job_id), name=name, queue=queue, state=state))
            _count(cursor, [(r.name, r.queue, "retried" if r.state == "ready" else r.state) for r in rescued], when)
        return rescued

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
        return LeaderLease(leading=leading, now=when, expires_at=_parse_ts(expires_at), holder=current,
                           version=int(version))

    def leader_resign(self, *, name: str, holder: str, now: datetime | None) -> bool:
        stamp = ts(now or clock.now())
        with self._cursor() as cursor:
            cursor.execute(LEADER_RESIGN, [stamp, stamp, name, holder, stamp])
            return bool(cursor.rowcount == 1)

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

    def queue_wake(self, *, queues: Sequence[str]) -> None:
        """SQLite workers poll: nothing to send."""

    def listen(self, *, channel: str, on_wake: Callable[[str], None], queues: Iterable[str] = ()) -> None:
        """SQLite has no LISTEN: workers and relays poll."""

    def counter_fold(self, *, before: datetime) -> int:
        """Fold 1-minute counter buckets older than ``before`` into the coarser tiers; answer rows written."""
        tally: dict[tuple[Any, ...], int] = {}
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(COUNTER_FOLD_READ, [ts(before)])
            for name, queue, outcome, bucket, shard, count in cursor.fetchall():
                when = datetime.fromisoformat(bucket) if isinstance(bucket, str) else bucket
                when = when.replace(tzinfo=UTC) if when.tzinfo is None else when
                for width in (300, 3600):
                    key = (name, queue, outcome, width, _bucket(when, width), shard)
                    tally[key] = tally.get(key, 0) + count
            for key, count in sorted(tally.items()):
                cursor.execute(COUNTER_FOLD_ADD, [*key, count])
            cursor.execute(COUNTER_FOLD_DELETE, [ts(before)])
        return len(tally)

    def counter_add(self, *, events: Sequence[tuple[str, str, str]], now: datetime | None) -> None:
        """Count one ``(name, queue, outcome)`` event each (minute bucket and all-time row)."""
        if not events:
            return
        with self._atomic(), self._cursor() as cursor:
            _count(cursor, events, now or clock.now())

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
                       r.concurrency_key, r.traceparent]
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_STAGE_MANY.format(rows=", ".join([OUTBOX_STAGE_ROW] * len(rows))), params)

    def outbox_claim(self, *, relay_id: str, limit: int, lease: float,
                     now: datetime | None) -> list[JobRow]:
        when = now or clock.now()
        lapsed = ts(when - timedelta(seconds=lease))
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_CLAIM, [ts(when), relay_id, lapsed, lapsed, limit])
            rows = _named(cursor)
        rows.sort(key=lambda r: (r.pop("staged_at"), r["id"]))  # the text forms sort like the values
        return [JobRow(**{**r, "id": _uuid(r["id"]), "run_id": _uuid(r["run_id"]), "run_at": _aware(r["run_at"])},
                       delay=0.0) for r in rows]

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
            return {_uuid(row[0]) for row in cursor.fetchall()}

    def outbox_release(self, *, ids: Sequence[UUID], relay_id: str) -> set[UUID]:
        if not ids:
            return set()
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_RELEASE.format(ids=", ".join(["%s"] * len(ids))),
                           [i.hex for i in ids] + [relay_id])
            return {_uuid(row[0]) for row in cursor.fetchall()}

    def outbox_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        with self._cursor() as cursor:
            cursor.execute(OUTBOX_PURGE, [ts((now or clock.now()) - timedelta(seconds=retention)), limit])
            return int(cursor.rowcount)

    def event_purge(self, *, retention: float, now: datetime | None, limit: int = 1000) -> int:
        """Delete one batch of events past ``retention`` that no open wait could match; answer how many."""
        with self._cursor() as cursor:
            cursor.execute(EVENT_PURGE, [ts((now or clock.now()) - timedelta(seconds=retention)), limit])
            return int(cursor.rowcount)

    # -- durable runs ------------------------------------------------------------------------------

    def step_list(self, *, run_id: UUID, now: datetime | None) -> list[StepRow]:
        when = now or clock.now()
        with self._cursor() as cursor:
            cursor.execute(STEP_LIST, [run_id.hex])
            rows = cursor.fetchall()
        steps = []
        for name, status, output, executions, seq, started_at, wake_at, event, event_match in rows:
            wake = _parse_ts(wake_at)
            remaining = None if wake is None else (wake - when).total_seconds()
            steps.append(StepRow(name=name, status=status, output=output, executions=executions, seq=seq,
                                 started_at=_parse_ts(started_at), wake_at=wake, remaining=remaining, event=event,
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

    def event_publish(self, *, event_id: UUID, name: str, payload: str, now: datetime | None) -> int:
        """Store the event and wake its waiters, on the caller's connection (its transaction)."""
        stamp = ts(now or clock.now())
        document = jsoncodec.loads(payload)
        woken = 0
        with self._cursor() as cursor:
            cursor.execute(EVENT_INSERT, [event_id.hex, name, payload, stamp])
            cursor.execute(EVENT_WAITERS, [name, stamp, stamp])
            for job_id, match in cursor.fetchall():
                if match is None or jsoncodec.contains(document, jsoncodec.loads(match)):
                    cursor.execute(JOB_WAKE, [stamp, stamp, job_id, stamp])
                    woken += cursor.rowcount
        return woken

    def event_find(self, *, name: str, match: str | None, since: datetime) -> str | None:
        wanted = None if match is None else jsoncodec.loads(match)
        with self._cursor() as cursor:
            cursor.execute(EVENT_SINCE, [name, ts(since)])
            for (payload,) in cursor.fetchall():
                if wanted is None or jsoncodec.contains(jsoncodec.loads(payload), wanted):
                    return str(payload)
        return None

    def job_progress(self, *, job_id: UUID, claim: UUID, progress: str, now: datetime | None) -> bool:
        with self._cursor() as cursor:
            cursor.execute(JOB_PROGRESS, [progress, job_id.hex, claim.hex])
            return cursor.rowcount == 1

    def job_wake_waiter(self, *, job_id: UUID, now: datetime | None) -> bool:
        stamp = ts(now or clock.now())
        with self._atomic(), self._cursor() as cursor:
            cursor.execute(JOB_OPEN_WAIT, [job_id.hex])
            row = cursor.fetchone()
            if row is None:
                return False
            event, match, started_at = row
            if self.event_find(name=event, match=match, since=_parse_ts(started_at) or clock.now()) is None:
                return False
            cursor.execute(JOB_WAKE, [stamp, stamp, job_id.hex, stamp])
            return cursor.rowcount == 1
