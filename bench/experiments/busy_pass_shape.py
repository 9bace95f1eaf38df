"""A busy worker's pass (settle the finished, claim as many): the pipelined transaction the worker
sent before 713baf4 (BEGIN, the settle, SET LOCAL plan mode, the claim, COMMIT) against the settle and the claim
alone in one pipeline, one implicit transaction ended by the pipeline's Sync (no BEGIN, SET or
COMMIT), the plan mode set once for the session.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench. The two shapes alternate pass by
pass over one backlog on a throwaway database; each pass settles the previous pass's claims as done.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import psycopg
from django.db import connection

from ultimate_jobs.db.postgres import jobs as postgres
from ultimate_jobs.db.store import Settlement

PASSES = int(os.environ.get("PASSES", "400"))
BATCH = int(os.environ.get("BATCH", "10"))
measure.enqueue_many((2 * PASSES + 2) * BATCH)  # each pass claims BATCH per shape
connection.ensure_connection()
conn = connection.connection
conn.prepare_threshold = 2**31 - 1
claim_params = {"queue": "default", "names": ["bench.noop"], "limit": BATCH, "worker_id": "exp", "visibility": 30.0,
                "now": None, "blocked": []}


def transaction_form(settle):  # the worker's pass before 713baf4
    with psycopg.Cursor(conn) as s, psycopg.Cursor(conn, row_factory=postgres._CLAIMED) as c:
        with conn.pipeline(), conn.transaction():
            if settle:
                s.execute(postgres.JOB_SETTLE_MANY, postgres._settlement_columns(settle, None), prepare=True)
            conn.execute(postgres.CLAIM_PLAN)
            c.execute(postgres.JOB_CLAIM, claim_params, prepare=True)
        if settle:
            s.fetchall()
        return c.fetchall()


def implicit_form(settle):
    with psycopg.Cursor(conn) as s, psycopg.Cursor(conn, row_factory=postgres._CLAIMED) as c:
        with conn.pipeline():
            s.execute(postgres.JOB_SETTLE_MANY, postgres._settlement_columns(settle, None), prepare=True)
            c.execute(postgres.JOB_CLAIM, claim_params, prepare=True)
        s.fetchall()
        return c.fetchall()


conn.execute("SET plan_cache_mode TO force_generic_plan")
variants = {"transaction block (the worker before)": transaction_form,
            "one implicit transaction (the worker now)": implicit_form}
res = {k: [] for k in variants}
held = transaction_form([])
for i in range(PASSES):
    for name, fn in variants.items():
        settle = [Settlement(id=r.id, claim=r.claim, state="done", result="null") for r in held]
        t0 = time.perf_counter()
        held = fn(settle)
        elapsed = (time.perf_counter() - t0) * 1000
        assert len(held) == BATCH, (name, len(held), i)
        if i >= 5:
            res[name].append(elapsed)
with connection.cursor() as cursor:
    cursor.execute("SELECT state, count(*) FROM ultimate_jobs_job GROUP BY state ORDER BY state")
    print("rows by state:", cursor.fetchall())
for k, v in res.items():
    q1, _, q3 = statistics.quantiles(v, n=4)
    print(f"{k:36} pass of {BATCH}: median {statistics.median(v):.3f} ms, quartiles {q1:.3f}-{q3:.3f} (n={len(v)})")
measure.drop_database()
