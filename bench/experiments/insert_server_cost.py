"""Server-side cost of the 1,000-row insert per index set: EXPLAIN ANALYZE execution time.

Ad hoc, run by hand (see bench/RESULTS.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against (b6b67e6).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import re
import statistics

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
from django.db import connection, transaction

from bench.jobs import noop
from ultimate_jobs.db.postgres import jobs as postgres

opts = noop.using()
seq = itertools.count(10**9)
measure.enqueue_many(10000)
tables = {
    "as is (6 indexes)": [],
    "without (state, queue) index": ["state"],
    "without (state, queue) and (run_id) indexes": ["state", "run"],
    "as is, plain INSERT (no ON CONFLICT)": [],
    "as is, payload not parsed ('{}'::jsonb)": [],
}
with connection.cursor() as c:
    for i, drop in enumerate(tables.values()):
        c.execute(f"CREATE TABLE exp_{i} (LIKE ultimate_jobs_job INCLUDING ALL)")
        c.execute(f"INSERT INTO exp_{i} SELECT * FROM ultimate_jobs_job")
        c.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [f"exp_{i}"])
        idx = [r[0] for r in c.fetchall()]
        for d in drop:
            col = {"state": "state_queue_idx", "run": "run_id_idx"}[d]
            victim = [x for x in idx if x.endswith(col)]
            assert victim, (idx, col)
            c.execute(f"DROP INDEX {victim[0]}")
        c.execute(f"ANALYZE exp_{i}")
res = {k: [] for k in tables}
for _rnd in range(10):
    for i, name in enumerate(tables):
        rows = [opts.row({"i": -1, "seq": next(seq)}) for _ in range(1000)]
        params = {**postgres.row_columns(rows), "now": None, "notify": []}
        sql = postgres.JOB_INSERT_MANY.replace(
            "INSERT INTO ultimate_jobs_job AS j", f"INSERT INTO exp_{i} AS j"
        )
        if "plain" in name:
            sql = sql.replace(
                """ON CONFLICT (name, (coalesce(tenant_id, '')), idempotency_key)
       WHERE state IN ('ready', 'delayed', 'running', 'suspended') DO NOTHING""",
                "",
            )
            assert "ON CONFLICT" not in sql
        if "payload" in name:
            sql = sql.replace("v.payload::jsonb", "'{}'::jsonb")
            assert "v.payload::jsonb" not in sql
        with transaction.atomic(), connection.cursor() as c:
            c.execute("EXPLAIN (ANALYZE) " + sql, params)
            plan = "\n".join(r[0] for r in c.fetchall())
        res[name].append(float(re.search(r"Execution Time: ([0-9.]+)", plan).group(1)))
with connection.cursor() as c:
    c.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'ultimate_jobs_job'")
    for r in c.fetchall():
        print("  ", r[1])
for k, v in res.items():
    print(
        f"{k:45} insert 1000 rows, server execution: median {statistics.median(v):6.2f} ms "
        f"(min {min(v):.2f}, max {max(v):.2f}, n={len(v)})"
    )
measure.drop_database()
