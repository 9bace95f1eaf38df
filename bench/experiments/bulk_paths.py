"""The enqueue_many write path, alternatives side by side: wall time of one batch, commit included.

Run by hand (not part of make bench); variants alternate in blocks on one database, medians::

    .venv/bin/python bench/experiments/bulk_paths.py             # ROUNDS=15 ROWS=1000,10000
    VARIANTS=unnest,copy-direct ROUNDS=5 .venv/bin/python bench/experiments/bulk_paths.py

Every variant writes the same pre-built rows (fresh keys: no dedupe, the common case) through the
store's connection in autocommit, so the row building (shared by all) is not in the figure:

- ``unnest``       -- the store as it was: ``INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO
                      NOTHING RETURNING`` per 1,000 rows, each its own commit;
- ``unnest-1tx``   -- the same statements, one transaction for the whole batch;
- ``copy-temp``    -- binary COPY into a ``TEMP TABLE ... ON COMMIT DROP``, then one INSERT ...
                      SELECT ... ON CONFLICT from it, one transaction;
- ``copy-stage``   -- binary COPY into a permanent UNLOGGED staging table keyed by a batch id, the
                      INSERT ... SELECT ... ON CONFLICT from it, then its DELETE, one transaction;
- ``copy-direct``  -- the live keys looked up first (one statement), then a binary COPY straight
                      into the job table, one transaction (a key taken meanwhile fails the COPY,
                      which the store would then redo by ``unnest``);
- ``store``        -- whatever ``job_insert_many`` does in the tree being measured.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import os
import statistics
import time
import uuid

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import psycopg
from django.db import connection

from bench.jobs import noop
from ultimate_jobs.db import store_for
from ultimate_jobs.db.postgres import jobs as pg

ROUNDS = int(os.environ.get("ROUNDS", "15"))
SIZES = [int(n) for n in os.environ.get("ROWS", "1000,10000").split(",")]
VARIANTS = os.environ.get("VARIANTS", "unnest,unnest-1tx,copy-temp,copy-stage,copy-direct,store").split(",")
seq = itertools.count(10**9)
opts = noop.using()
store = store_for("default")

COLUMNS = ("id", "run_id", "name", "queue", "priority", "state", "payload", "idempotency_key", "tenant_id",
           "enqueued_by", "attempt", "max_attempts", "run_at", "concurrency_key", "traceparent", "created_at",
           "updated_at")
TYPES = ("uuid", "uuid", "varchar", "varchar", "int4", "varchar", "jsonb", "text", "varchar", "varchar", "int4",
         "int4", "timestamptz", "varchar", "varchar", "timestamptz", "timestamptz")
STAGE_COLUMNS = ("batch", "id", "run_id", "name", "queue", "priority", "payload", "idempotency_key", "tenant_id",
                 "enqueued_by", "max_attempts", "delay", "run_at", "concurrency_key", "traceparent")
STAGE_TYPES = ("uuid", "uuid", "uuid", "text", "text", "int4", "text", "text", "text", "text", "int4", "float8",
               "timestamptz", "text", "text")
FROM_STAGE = pg.JOB_INSERT_MANY.replace(pg._JOB_ROWS_ARRAYS, "{source} AS v").replace(
    "SELECT ins.id, (SELECT count(*) FROM woken) FROM ins", "SELECT ins.id FROM ins, (SELECT count(*) FROM woken) AS w")


def raw():
    connection.ensure_connection()
    return connection.connection


def rows(n):
    return [opts.row({"i": -1, "seq": next(seq)}) for _ in range(n)]


def stage_values(r, batch=None):
    values = (r.id, r.run_id, r.name, r.queue, r.priority, r.payload, r.idempotency_key, r.tenant_id,
              r.enqueued_by, r.max_attempts, r.delay, r.run_at, r.concurrency_key, r.traceparent)
    return values if batch is None else (batch, *values)


def v_unnest(batch, one_tx=False):
    conn = raw()
    ctx = conn.transaction() if one_tx else _null()
    with ctx:
        for start in range(0, len(batch), 1000):
            chunk = batch[start:start + 1000]
            with psycopg.Cursor(conn) as c:  # server-side binding, binary arrays: as the store sends them
                c.execute(pg.JOB_INSERT_MANY, {**pg.row_columns(chunk), "now": None, "notify": ["default"]},
                          prepare=True)
                assert len(c.fetchall()) == len(chunk)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def v_copy_temp(batch):
    conn = raw()
    with conn.transaction(), conn.cursor() as c:
        c.execute("CREATE TEMP TABLE exp_stage (id uuid, run_id uuid, name text, queue text, priority int4,"
                  " payload text, idempotency_key text, tenant_id text, enqueued_by text, max_attempts int4,"
                  " delay float8, run_at timestamptz, concurrency_key text, traceparent text) ON COMMIT DROP")
        with c.copy(f"COPY exp_stage ({', '.join(STAGE_COLUMNS[1:])}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(list(STAGE_TYPES[1:]))
            for r in batch:
                cp.write_row(stage_values(r))
        c.execute(FROM_STAGE.format(source="exp_stage"), {"now": None, "notify": ["default"]})
        assert len(c.fetchall()) == len(batch)


def v_copy_stage(batch):
    conn = raw()
    key = uuid.uuid4()
    with conn.transaction(), conn.cursor() as c:
        with c.copy(f"COPY exp_stage_u ({', '.join(STAGE_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(list(STAGE_TYPES))
            for r in batch:
                cp.write_row(stage_values(r, key))
        c.execute(FROM_STAGE.format(source="(SELECT * FROM exp_stage_u WHERE batch = %(batch)s)"),
                  {"now": None, "notify": ["default"], "batch": key})
        assert len(c.fetchall()) == len(batch)
        c.execute("DELETE FROM exp_stage_u WHERE batch = %s", [key])


def v_copy_direct(batch):
    from psycopg.types.json import Jsonb

    conn = raw()
    with conn.transaction(), conn.cursor() as c:
        c.execute("SELECT now()")
        (now,) = c.fetchone()
        c.execute(pg.JOB_LIVE_BY_KEY, {"name": [r.name for r in batch], "tenant": [r.tenant_id or "" for r in batch],
                                       "key": [r.idempotency_key for r in batch]})
        assert not c.fetchall()
        with c.copy(f"COPY ultimate_jobs_job ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(list(TYPES))
            for r in batch:
                run_at = r.run_at or now
                cp.write_row((r.id, r.run_id, r.name, r.queue, r.priority, "ready" if run_at <= now else "delayed",
                              Jsonb(r.payload, dumps=_same), r.idempotency_key, r.tenant_id, r.enqueued_by, 0,
                              r.max_attempts, run_at, r.concurrency_key, r.traceparent, now, now))
        c.execute("SELECT pg_notify('ultimate_jobs', 'default')")


def _same(text):
    return text


def v_store(batch):
    for start in range(0, len(batch), 1000):
        store.job_insert_many(rows=batch[start:start + 1000], now=None, notify=["default"])


RUN = {"unnest": v_unnest, "unnest-1tx": lambda b: v_unnest(b, one_tx=True), "copy-temp": v_copy_temp,
       "copy-stage": v_copy_stage, "copy-direct": v_copy_direct, "store": v_store}

with connection.cursor() as c:
    c.execute("CREATE UNLOGGED TABLE exp_stage_u (batch uuid, id uuid, run_id uuid, name text, queue text,"
              " priority int4, payload text, idempotency_key text, tenant_id text, enqueued_by text,"
              " max_attempts int4, delay float8, run_at timestamptz, concurrency_key text, traceparent text)")
    c.execute("CREATE INDEX ON exp_stage_u (batch)")
connection.set_autocommit(True)
times = {(v, n): [] for v in VARIANTS for n in SIZES}
for _ in range(2):  # warm-up: plans prepared, caches filled
    for v in VARIANTS:
        RUN[v](rows(200))
for rnd in range(ROUNDS):
    for n in SIZES:
        order = VARIANTS if rnd % 2 == 0 else list(reversed(VARIANTS))
        for v in order:
            batch = rows(n)
            t0 = time.perf_counter()
            RUN[v](batch)
            times[(v, n)].append(time.perf_counter() - t0)
    with connection.cursor() as c:  # keep the table from growing into another regime between rounds
        c.execute("TRUNCATE ultimate_jobs_job")
print(f"{ROUNDS} rounds, variants alternated (order reversed every other round); median (min-max) per batch")
for n in SIZES:
    for v in VARIANTS:
        t = times[(v, n)]
        print(f"  {n:6} rows  {v:12} {statistics.median(t) * 1000:8.2f} ms  ({min(t) * 1000:.2f}-{max(t) * 1000:.2f})"
              f"  {n / statistics.median(t):9,.0f} rows/s")
measure.drop_database()
