"""Where an idle claim's server time goes: planning against execution, per plan_cache_mode.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench. One job is enqueued and claimed
SAMPLES times per mode on a throwaway database; each claim is timed from the client (prepared, as
the worker runs it) and once more under EXPLAIN ANALYZE for the server's planning and execution.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import re
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import psycopg
from django.db import connection

from bench.jobs import noop
from ultimate_jobs.db import store_for
from ultimate_jobs.db.postgres import jobs as postgres

SAMPLES = int(os.environ.get("SAMPLES", "200"))
store = store_for("default")
measure.enqueue_many(2000)  # a table with some history, like the bench's
with connection.cursor() as c:
    c.execute("UPDATE ultimate_jobs_job SET state = 'done', finished_at = now()")
    c.execute("ANALYZE ultimate_jobs_job")


def claim_once(seq: int) -> float:
    noop.enqueue(i=-1, seq=seq)
    t0 = time.perf_counter()
    got = store.job_claim(queue="default", names=["bench.noop"], limit=10, worker_id="exp",
                          visibility=30.0, now=None)
    t1 = time.perf_counter()
    assert len(got) == 1, got
    return (t1 - t0) * 1000


def explain_once(seq: int) -> tuple[float, float]:
    noop.enqueue(i=-1, seq=seq)
    params = {"queue": "default", "names": ["bench.noop"], "limit": 10, "worker_id": "exp",
              "visibility": 30.0, "now": None, "blocked": []}
    connection.ensure_connection()
    # psycopg's own cursor: the binary (b) placeholders need server-side binding, as the store's
    with psycopg.Cursor(connection.connection) as raw:
        raw.execute("EXPLAIN (ANALYZE) " + postgres.JOB_CLAIM, params)
        plan = "\n".join(r[0] for r in raw.fetchall())
    return (float(re.search(r"Planning Time: ([0-9.]+)", plan).group(1)),
            float(re.search(r"Execution Time: ([0-9.]+)", plan).group(1)))


seq = 10**6
for mode in ("auto", "force_generic_plan", "force_custom_plan", "auto"):
    connection.close()
    connection.ensure_connection()
    with connection.cursor() as c:
        c.execute(f"SET plan_cache_mode = {mode}")
    times = []
    for _ in range(SAMPLES):
        seq += 1
        times.append(claim_once(seq))
    plans = []
    for _ in range(20):
        seq += 1
        plans.append(explain_once(seq))
    warm = times[10:]
    print(f"{mode:20} claim, client: median {statistics.median(warm):.3f} ms, p95 "
          f"{sorted(warm)[int(len(warm) * 0.95)]:.3f} (n={len(warm)}); unprepared EXPLAIN: planning "
          f"{statistics.median(p for p, _ in plans):.3f} ms, execution {statistics.median(e for _, e in plans):.3f} ms")
measure.drop_database()
