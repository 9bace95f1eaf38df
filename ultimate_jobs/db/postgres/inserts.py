"""Internal: the job table's inserts on PostgreSQL: a fresh job (or a batch of them) with the dedupe.

A single enqueue and a batch under ``COPY_MIN_ROWS`` rows are one ``INSERT ... ON CONFLICT`` on the
live-key index per 1,000 rows (``JOB_INSERT_ONE``, ``JOB_INSERT_MANY``). A larger batch -- an
``enqueue_many``, a relay's publish -- goes by binary ``COPY`` (``job_copy_many``):
``INSERT ... SELECT FROM unnest(...) ON CONFLICT`` pays a speculative insertion per row and one
statement per 1,000, where ``COPY`` writes the heap in batches and streams up to 10,000 rows in one
statement (the A/B figures: docs/scaling.md, "The write path"; ``bench/experiments/bulk_paths.py``).
The COPY keeps the ``INSERT``'s guarantees:

- **dedupe**: the batch's keys are looked up among the live rows first, in the same transaction; a
  held key answers the live row, ``deduped=True``, and its row is not sent. A key taken by another
  enqueue after the look-up makes the live-key unique index refuse the ``COPY`` (nothing of it is
  written), and the batch is written again by the ``INSERT`` path, whose ``ON CONFLICT`` decides;
- **the database's clock**: ``created_at`` and a ``run_at`` not given are the transaction's
  ``coalesce(%(now)s, now())``, read by the look-up statement, and the state follows from them
  exactly as the ``INSERT`` computes it;
- **one transaction**: in autocommit the look-up, the ``COPY`` and the wake are one transaction
  (``BEGIN`` and ``COMMIT`` pipelined with them); inside the caller's transaction (the relay's, the
  scheduler's) they run in a savepoint of it, so a refused ``COPY`` rolls back only itself;
- **poolers**: no temporary table, no session state, nothing prepared (SPEC §16): the whole write is
  one transaction, which a transaction-mode pooler keeps on one server connection.

Round trips: four per call whatever its size up to 10,000 rows (the look-up, the ``COPY``'s start
and its end, the wake with the ``COMMIT``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString

from django.db import transaction

from ultimate_jobs.db.postgres.connection import PostgresConnection
from ultimate_jobs.db.states import LIVE
from ultimate_jobs.db.store import JOBS_CHANNEL, Inserted, JobRow

INSERT_STATEMENT_ROWS = 1_000  # rows per INSERT statement: one round trip each
COPY_MIN_ROWS = 500  # under ~300-500 rows the INSERT's one round trip beats the COPY's four (bulk_paths.py)

# The rows of a batch as one array per column (sent in binary), unpacked into v: shared by the
# insert and the outbox's staging, so both read a batch the same way.
_JOB_ROWS_ARRAYS: LiteralString = """unnest(%(id)b::uuid[], %(run_id)b::uuid[], %(name)b::text[], %(queue)b::text[],
                     %(priority)b::int[], %(payload)b::text[], %(idempotency_key)b::text[],
                     %(tenant_id)b::text[], %(enqueued_by)b::text[], %(max_attempts)b::int[],
                     %(delay)b::float8[], %(run_at)b::timestamptz[], %(concurrency_key)b::text[],
                     %(traceparent)b::text[], %(sensitive)b::bool[])
           AS v(id, run_id, name, queue, priority, payload, idempotency_key, tenant_id, enqueued_by,
                max_attempts, delay, run_at, concurrency_key, traceparent, sensitive)"""

JOB_INSERT_MANY: LiteralString = """
-- Insert validated rows; a row whose live key is held already is skipped: that is the dedupe.
-- The conflict target repeats the live-key index exactly (expressions and predicate), and the
-- notify CTE wakes idle workers once per named queue, at commit (NOTIFY is transactional).
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
ins AS (
    INSERT INTO ultimate_jobs_job AS j (
        id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, enqueued_by,
        attempt, max_attempts, run_at, concurrency_key, traceparent, sensitive, created_at, updated_at)
    SELECT v.id, v.run_id, v.name, v.queue, v.priority,
           CASE WHEN coalesce(v.run_at, t.now + v.delay * interval '1 second') > t.now
                THEN 'delayed' ELSE 'ready' END,
           v.payload::jsonb, v.idempotency_key, v.tenant_id, v.enqueued_by, 0, v.max_attempts,
           coalesce(v.run_at, t.now + v.delay * interval '1 second'), v.concurrency_key, v.traceparent,
           v.sensitive, t.now, t.now
      FROM t, """ + _JOB_ROWS_ARRAYS + """
    ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key)
       WHERE state IN """ + LIVE + """ DO NOTHING
    RETURNING j.id, j.queue),
woken AS (SELECT pg_notify('""" + JOBS_CHANNEL + """', q.queue) FROM (SELECT DISTINCT queue FROM ins) AS q
           WHERE q.queue = ANY(%(notify)b::text[]))
SELECT ins.id, (SELECT count(*) FROM woken) FROM ins
"""

_NOW: LiteralString = "coalesce(%(now)s::timestamptz, now())"
_RUN_AT: LiteralString = "coalesce(%(run_at)s::timestamptz, " + _NOW + " + %(delay)s * interval '1 second')"

JOB_INSERT_ONE: LiteralString = """
-- The one-row form of JOB_INSERT_MANY (a single enqueue): the same conflict target, written as a
-- plain INSERT ... VALUES, with no CTE to materialise and no arrays to build and unpack on the hot
-- path. The wake rides in RETURNING, so it is sent only for a row actually inserted (a deduped
-- enqueue returns no row and wakes nobody), at commit, and only when %(notify)s says one is due.
INSERT INTO ultimate_jobs_job AS j (
    id, run_id, name, queue, priority, state, payload, idempotency_key, tenant_id, enqueued_by,
    attempt, max_attempts, run_at, concurrency_key, traceparent, sensitive, created_at, updated_at)
VALUES (%(id)s, %(run_id)s, %(name)s, %(queue)s, %(priority)s,
        CASE WHEN """ + _RUN_AT + " > " + _NOW + """ THEN 'delayed' ELSE 'ready' END,
        %(payload)s::jsonb, %(idempotency_key)s, %(tenant_id)s, %(enqueued_by)s, 0, %(max_attempts)s,
        """ + _RUN_AT + """, %(concurrency_key)s, %(traceparent)s, %(sensitive)s, """ + _NOW + ", " + _NOW + """)
ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key)
   WHERE state IN """ + LIVE + """ DO NOTHING
RETURNING j.id, CASE WHEN %(notify)s::boolean THEN pg_notify('""" + JOBS_CHANNEL + """', j.queue)::text END
"""

JOB_LIVE_BY_KEY: LiteralString = """
-- The live row holding each dedupe key: the same columns and states as the live-key index.
SELECT j.id, j.run_id, j.name, coalesce(j.tenant_id, ''), j.idempotency_key
  FROM ultimate_jobs_job AS j
  JOIN unnest(%(name)b::text[], %(tenant)b::text[], %(key)b::text[]) AS k(name, tenant, key)
    ON j.name = k.name AND coalesce(j.tenant_id, '') = k.tenant AND j.idempotency_key = k.key
 WHERE j.state IN """ + LIVE + """
"""

JOB_COPY_LOOKUP: LiteralString = """
-- Before a COPY of fresh rows (job_copy_many): the transaction's clock, then every live row that
-- already holds one of the batch's keys (the live-key index: same columns, same states).
SELECT coalesce(%(now)s::timestamptz, now()) AS now, NULL::uuid AS id, NULL::uuid AS run_id, NULL::text AS name,
       NULL::text AS tenant, NULL::text AS key
UNION ALL
SELECT NULL, j.id, j.run_id, j.name, coalesce(j.tenant_id, ''), j.idempotency_key
  FROM ultimate_jobs_job AS j
  JOIN unnest(%(name)b::text[], %(tenant)b::text[], %(key)b::text[]) AS k(name, tenant, key)
    ON j.name = k.name AND coalesce(j.tenant_id, '') = k.tenant AND j.idempotency_key = k.key
 WHERE j.state IN """ + LIVE + """
"""

# Every column a fresh row sets, in COPY order, with the binary type of each; the rest take their
# defaults (attempts: [], the lease and result columns: NULL).
COPY_COLUMNS: tuple[LiteralString, ...] = (
    "id", "run_id", "name", "queue", "priority", "state", "payload", "idempotency_key", "tenant_id", "enqueued_by",
    "attempt", "max_attempts", "run_at", "concurrency_key", "traceparent", "sensitive", "created_at", "updated_at")
COPY_TYPES = ("uuid", "uuid", "varchar", "varchar", "int4", "varchar", "jsonb", "text", "varchar", "varchar", "int4",
              "int4", "timestamptz", "varchar", "varchar", "bool", "timestamptz", "timestamptz")
JOB_COPY: LiteralString = ("COPY ultimate_jobs_job (" + ", ".join(COPY_COLUMNS) + ") FROM STDIN (FORMAT BINARY)")

JOB_COPY_WAKE: LiteralString = """
-- Wake idle workers of the queues the COPY wrote to, at commit (NOTIFY is transactional).
SELECT count(pg_notify('""" + JOBS_CHANNEL + """', q.queue)) FROM unnest(%(queues)b::text[]) AS q(queue)
"""


def row_columns(rows: Sequence[JobRow]) -> dict[str, list[Any]]:
    return {
        "id": [r.id for r in rows], "run_id": [r.run_id for r in rows], "name": [r.name for r in rows],
        "queue": [r.queue for r in rows], "priority": [r.priority for r in rows],
        "payload": [r.payload for r in rows], "idempotency_key": [r.idempotency_key for r in rows],
        "tenant_id": [r.tenant_id for r in rows], "enqueued_by": [r.enqueued_by for r in rows],
        "max_attempts": [r.max_attempts for r in rows], "delay": [r.delay for r in rows],
        "run_at": [r.run_at for r in rows], "concurrency_key": [r.concurrency_key for r in rows],
        "traceparent": [r.traceparent for r in rows], "sensitive": [r.sensitive for r in rows],
    }


def row_params(row: JobRow) -> dict[str, Any]:
    return {
        "id": row.id, "run_id": row.run_id, "name": row.name, "queue": row.queue, "priority": row.priority,
        "payload": row.payload, "idempotency_key": row.idempotency_key, "tenant_id": row.tenant_id,
        "enqueued_by": row.enqueued_by, "max_attempts": row.max_attempts, "delay": row.delay, "run_at": row.run_at,
        "concurrency_key": row.concurrency_key, "traceparent": row.traceparent, "sensitive": row.sensitive,
    }


def _live_key(row: JobRow) -> tuple[str, str, str]:
    return row.name, row.tenant_id or "", row.idempotency_key


@functools.cache
def _jsonb_text_dumper() -> type[Any]:
    """A binary ``jsonb`` dumper for JSON that is text already (the declaration encoded it): the
    format's version byte and the text, with no Python ``json.dumps`` per row. Registered by oid
    only, so it serves the COPY's ``set_types`` and nothing else the cursor sends."""
    from psycopg.adapt import Dumper
    from psycopg.postgres import types
    from psycopg.pq import Format

    class JsonbText(Dumper):
        format = Format.BINARY
        oid = types["jsonb"].oid

        def dump(self, obj: str) -> bytes:
            return b"\x01" + obj.encode()

    return JsonbText


class InsertStatements(PostgresConnection):
    """``job_insert_many`` (an INSERT, or a COPY for a large batch) and ``job_copy_many``."""

    insert_batch_rows = 10_000  # the COPY path streams a whole enqueue_many; the INSERT path splits it

    def job_insert_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                        notify: Sequence[str] = ()) -> list[Inserted]:
        """A batch of ``COPY_MIN_ROWS`` or more by binary COPY (``job_copy_many``), unless a key was
        taken meanwhile; otherwise, and for a smaller batch, one ``INSERT ... ON CONFLICT`` per 1,000 rows."""
        # Every batch writes its keys in one order (the live key's), so two batches taking the
        # same keys at once wait for each other in line instead of deadlocking; answers are read
        # back in the caller's order.
        ordered = sorted(rows, key=_live_key) if len(rows) > 1 else list(rows)
        answers: list[Inserted] | None = None
        if len(rows) >= COPY_MIN_ROWS:
            answers = self.job_copy_many(rows=ordered, now=now, notify=notify)
        if answers is None:
            answers = []
            for start in range(0, len(ordered), INSERT_STATEMENT_ROWS):
                answers += self._job_insert_chunk(ordered[start:start + INSERT_STATEMENT_ROWS], now, notify)
        if ordered is rows or len(rows) == 1:
            return answers
        by_key = {r.dedupe_key: answer for r, answer in zip(ordered, answers, strict=True)}
        return [by_key[r.dedupe_key] for r in rows]

    def _job_insert_chunk(self, rows: Sequence[JobRow], now: datetime | None,
                          notify: Sequence[str]) -> list[Inserted]:
        answers: dict[tuple[str, str, str], Inserted] = {}
        pending = list(rows)
        prepare = self._prepare()
        with self._cursor() as cursor:
            for _ in range(5):
                if len(pending) == 1:
                    cursor.execute(JOB_INSERT_ONE, {**row_params(pending[0]), "now": now,
                                                    "notify": pending[0].queue in notify}, prepare=prepare)
                else:
                    cursor.execute(JOB_INSERT_MANY, {**row_columns(pending), "now": now, "notify": list(notify)},
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

    def job_copy_many(self, *, rows: Sequence[JobRow], now: datetime | None,
                      notify: Sequence[str] = ()) -> list[Inserted] | None:
        """Write ``rows`` (distinct dedupe keys) as ``job_insert_many`` does, by one binary COPY;
        answer None, having written nothing, when a key was taken between the look-up and the COPY
        (or the COPY deadlocked with another batch taking the same keys)."""
        import psycopg

        wrapper = self._connections[self.alias]
        with wrapper.wrap_database_errors:
            conn = self._connect(wrapper)
            own = bool(conn.autocommit)
            with psycopg.Cursor(conn) as cursor:
                cursor.adapters.register_dumper(None, _jsonb_text_dumper())  # this cursor's COPY only
                try:
                    with contextlib.nullcontext() if own else transaction.atomic(using=self.alias):
                        with conn.pipeline():
                            if own:
                                conn.execute("BEGIN")
                            cursor.execute(JOB_COPY_LOOKUP, {
                                "now": now, "name": [r.name for r in rows],
                                "tenant": [r.tenant_id or "" for r in rows],
                                "key": [r.idempotency_key for r in rows]})
                        found = cursor.fetchall()
                        clock: datetime = next(row[0] for row in found if row[1] is None)
                        held = {(name, tenant, key): Inserted(id=job_id, run_id=run_id, deduped=True)
                                for _, job_id, run_id, name, tenant, key in found if job_id is not None}
                        fresh = [r for r in rows if r.dedupe_key not in held]
                        if fresh:
                            with cursor.copy(JOB_COPY) as copy:
                                copy.set_types(list(COPY_TYPES))
                                for r in fresh:
                                    run_at = r.run_at if r.run_at is not None else (
                                        clock + timedelta(seconds=r.delay) if r.delay else clock)
                                    copy.write_row((
                                        r.id, r.run_id, r.name, r.queue, r.priority,
                                        "delayed" if run_at > clock else "ready", r.payload, r.idempotency_key,
                                        r.tenant_id, r.enqueued_by, 0, r.max_attempts, run_at, r.concurrency_key,
                                        r.traceparent, r.sensitive, clock, clock))
                        queues = sorted({r.queue for r in fresh} & set(notify))
                        with conn.pipeline():
                            if queues:
                                cursor.execute(JOB_COPY_WAKE, {"queues": queues})
                            if own:
                                conn.execute("COMMIT")
                except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
                    # A key another enqueue took after the look-up (or two batches inserting the same
                    # keys in different orders): nothing was written, and the INSERT path decides.
                    if own:
                        conn.execute("ROLLBACK")
                    return None
                except BaseException:  # anything at all, an interrupt too: roll back what we opened, then re-raise
                    if own and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        with contextlib.suppress(psycopg.Error):  # a broken connection: the first error stands
                            conn.execute("ROLLBACK")
                    raise
        answers = {r.dedupe_key: Inserted(id=r.id, run_id=r.run_id, deduped=False) for r in fresh}
        answers.update(held)
        return [answers[r.dedupe_key] for r in rows]

