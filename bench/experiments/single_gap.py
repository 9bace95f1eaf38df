"""What lies between a single enqueue and the floor (the same row's bare INSERT and COMMIT).

Run by hand (not part of make bench); variants alternate in blocks of BLOCK calls, medians of the
per-block mean::

    .venv/bin/python bench/experiments/single_gap.py            # N=2000 BLOCK=100, commits flushed
    SYNC=off .venv/bin/python bench/experiments/single_gap.py   # without the WAL flush: the CPU share

- ``library``    -- ``noop.enqueue(...)`` (render, validate, submit, store, wake bookkeeping);
- ``store``      -- ``store.job_insert_many`` of one pre-built row: the store's Python and statement;
- ``store sql``  -- ``JOB_INSERT_ONE`` on a psycopg connection of its own, prepared: the statement;
- ``lean sql``   -- the same insert as ``store sql`` written as ``INSERT ... VALUES ... ON CONFLICT ...
                    RETURNING id``: no CTE, no wake (what a single enqueue sends when no wake is due);
- ``floor+oc``   -- the floor with the live key's ``ON CONFLICT ... DO NOTHING``: the dedupe's share;
- ``floor``      -- the same row's bare ``INSERT ... VALUES`` and COMMIT, prepared (bench/measure.py).

Then a cProfile of the library call (SYNC=off), its top functions by own time.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import cProfile
import itertools
import os
import pstats
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import psycopg
from django.conf import settings
from django.db import connection

from bench.jobs import noop
from ultimate_jobs.db import store_for
from ultimate_jobs.db.postgres import JOB_INSERT_ONE
from ultimate_jobs.db.states import LIVE

N = int(os.environ.get("N", "2000"))
BLOCK = int(os.environ.get("BLOCK", "100"))
SYNC = os.environ.get("SYNC", "on")
seq = itertools.count(10**9)
store = store_for("default")
bound = noop.using()
raw = psycopg.connect(measure.dsn(settings.DATABASES["default"]["NAME"]), autocommit=True)
raw.execute(f"SET synchronous_commit = {SYNC}")
with connection.cursor() as c:
    c.execute(f"SET synchronous_commit = {SYNC}")
FIELDS = ("id", "run_id", "name", "queue", "priority", "payload", "idempotency_key", "tenant_id", "enqueued_by",
          "max_attempts", "delay", "run_at", "concurrency_key", "traceparent", "sensitive")


def params(k):
    return [{f: getattr(r, f) for f in FIELDS} for r in (bound.row({"i": -1, "seq": next(seq)}) for _ in range(k))]


def library(k):
    t0 = time.perf_counter()
    for _ in range(k):
        noop.enqueue(i=-1, seq=next(seq))
    return time.perf_counter() - t0


def store_call(k):
    rows = [bound.row({"i": -1, "seq": next(seq)}) for _ in range(k)]
    t0 = time.perf_counter()
    for r in rows:
        store.job_insert_many(rows=[r], now=None, notify=())
    return time.perf_counter() - t0


def store_sql(k):
    ps = params(k)
    t0 = time.perf_counter()
    for p in ps:
        raw.execute(JOB_INSERT_ONE, {**p, "now": None, "notify": False}, prepare=True).fetchall()
    return time.perf_counter() - t0


NOW = "coalesce(%(now)s::timestamptz, now())"
CONFLICT = "ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key) WHERE state IN " + LIVE + " DO NOTHING"
LEAN = (
    "INSERT INTO ultimate_jobs_job AS j (id, run_id, name, queue, priority, state, payload, idempotency_key,"
    " tenant_id, enqueued_by, attempt, max_attempts, run_at, concurrency_key, traceparent, created_at, updated_at)"
    " VALUES (%(id)s, %(run_id)s, %(name)s, %(queue)s, %(priority)s,"
    f" CASE WHEN coalesce(%(run_at)s::timestamptz, {NOW} + %(delay)s * interval '1 second') > {NOW}"
    " THEN 'delayed' ELSE 'ready' END, %(payload)s::jsonb, %(idempotency_key)s, %(tenant_id)s, %(enqueued_by)s, 0,"
    f" %(max_attempts)s, coalesce(%(run_at)s::timestamptz, {NOW} + %(delay)s * interval '1 second'),"
    f" %(concurrency_key)s, %(traceparent)s, {NOW}, {NOW}) " + CONFLICT + " RETURNING j.id")


def lean_sql(k):
    ps = params(k)
    t0 = time.perf_counter()
    for p in ps:
        raw.execute(LEAN, {**p, "now": None}, prepare=True).fetchall()
    return time.perf_counter() - t0


def floor_oc(k):
    ps = params(k)
    sql = measure.FLOOR_INSERT + " " + CONFLICT
    t0 = time.perf_counter()
    for p in ps:
        raw.execute(sql, p, prepare=True)
    return time.perf_counter() - t0


def floor(k):
    ps = params(k)
    t0 = time.perf_counter()
    for p in ps:
        raw.execute(measure.FLOOR_INSERT, p, prepare=True)
    return time.perf_counter() - t0


VARIANTS = {"library": library, "store": store_call, "store sql": store_sql, "lean sql": lean_sql,
            "floor+oc": floor_oc, "floor": floor}
VARIANTS = {k: v for k, v in VARIANTS.items() if k in os.environ.get("VARIANTS", ",".join(VARIANTS)).split(",")}
for send in VARIANTS.values():
    send(20)
per_call = {name: [] for name in VARIANTS}
for block in range(N // BLOCK):
    order = list(VARIANTS) if block % 2 == 0 else list(reversed(VARIANTS))
    for name in order:
        per_call[name].append(VARIANTS[name](BLOCK) / BLOCK * 1e6)
print(f"N={N} per variant, blocks of {BLOCK}, synchronous_commit={SYNC}: median of block means (min-max), µs a call")
base = statistics.median(per_call["floor"]) if "floor" in per_call else 1.0
for name, values in per_call.items():
    med = statistics.median(values)
    print(f"  {name:10} {med:8.1f} µs  ({min(values):.1f}-{max(values):.1f})  {1e6 / med:7,.0f}/s  "
          f"{med / base:5.2f}x the floor")
if SYNC == "off":
    profile = cProfile.Profile()
    profile.enable()
    library(1000)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(18)
raw.close()
measure.drop_database()
