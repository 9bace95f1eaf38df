"""An idle claim-only pass: the pipelined transaction the worker sent before 1da02f4 (BEGIN, two SET
LOCALs, the claim, COMMIT) against the claim alone in autocommit, with its commit mode set inside
it (JOB_CLAIM_ALONE, as the worker sends it now).

Ad hoc, run by hand (see docs/scaling.md); not part of make bench. A job is enqueued, then after
an idle gap (as in a sparse pickup) claimed; the claim is timed from the client.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import random
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import psycopg
from django.db import connection

from bench.jobs import noop
from ultimate_jobs.db.postgres import jobs as postgres

SAMPLES = int(os.environ.get("SAMPLES", "150"))
GAP = float(os.environ.get("GAP", "0.05"))
connection.ensure_connection()
conn = connection.connection
conn.prepare_threshold = 2**31 - 1
params = {"queue": "default", "names": ["bench.noop"], "limit": 10, "worker_id": "exp", "visibility": 30.0,
          "now": None, "blocked": []}
ONE = postgres.JOB_CLAIM_ALONE


def pipelined():  # the worker's idle pass before 1da02f4
    with psycopg.Cursor(conn, row_factory=postgres._CLAIMED) as c:
        with conn.pipeline(), conn.transaction():
            conn.execute(postgres.CLAIM_ONLY_COMMIT)
            conn.execute(postgres.CLAIM_PLAN)
            c.execute(postgres.JOB_CLAIM, params, prepare=True)
        return c.fetchall()


def single():
    with psycopg.Cursor(conn) as c:
        c.execute(ONE, params, prepare=True)
        return c.fetchall()


def single_synchronous():
    with psycopg.Cursor(conn) as c:
        c.execute(postgres.JOB_CLAIM, params, prepare=True)
        return c.fetchall()


def single_scoped_plan_mode():
    with psycopg.Cursor(conn) as c:
        with conn.pipeline():
            conn.execute("SET plan_cache_mode TO force_generic_plan")
            c.execute(ONE, params, prepare=True)
            conn.execute("RESET plan_cache_mode")
        return c.fetchall()


variants = {
    "one autocommit statement (the worker now)": single,
    "SET, the statement, RESET: autocommit, pipelined": single_scoped_plan_mode,
    "pipelined transaction (the worker before)": pipelined,
    "one autocommit statement, commit flushed": single_synchronous,
}
res = {k: [] for k in variants}
seq = 10**6
conn.execute("SET plan_cache_mode = force_generic_plan")  # the single form cannot SET LOCAL first
for i in range(SAMPLES):
    for name, fn in variants.items():
        seq += 1
        noop.enqueue(i=-1, seq=seq)
        time.sleep(random.uniform(GAP, 2 * GAP))
        t0 = time.perf_counter()
        got = fn()
        elapsed = (time.perf_counter() - t0) * 1000
        assert len(got) == 1, got
        if i >= 5:
            res[name].append(elapsed)
for k, v in res.items():
    q1, _, q3 = statistics.quantiles(v, n=4)
    print(f"{k:40} median {statistics.median(v):.3f} ms, quartiles {q1:.3f}-{q3:.3f} (n={len(v)})")
measure.drop_database()
