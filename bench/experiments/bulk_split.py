"""enqueue_many split: Python row building vs the statement, and what the indexes cost.

Ad hoc, run by hand (see bench/RESULTS.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against (b6b67e6).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import os
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)
from django.db import connection

from bench import measure
from bench.jobs import noop
from ultimate_jobs.db import store_for

opts = noop.using()
seq = itertools.count(10**9)
res = {}


def rec(k, v):
    res.setdefault(k, []).append(v)


def one_round(tag):
    measure.recreate_database()
    store = store_for()
    if tag:
        with connection.cursor() as c:
            for stmt in tag.split(";"):
                c.execute(stmt)
    measure.enqueue_one(-1)
    inputs = [{"i": -1, "seq": next(seq)} for _ in range(10000)]
    t0 = time.perf_counter()
    rows = [opts.row(v) for v in inputs]
    t1 = time.perf_counter()
    rec(f"{tag or 'as is'} | python: 10k x EnqueueOptions.row (ms)", (t1 - t0) * 1000)
    t0 = time.perf_counter()
    for s in range(0, 10000, 1000):
        store.job_insert_many(rows=rows[s : s + 1000], now=None, notify=[])
    t1 = time.perf_counter()
    rec(f"{tag or 'as is'} | store.job_insert_many 10 x 1000 (ms)", (t1 - t0) * 1000)
    t0 = time.perf_counter()
    noop.enqueue_many([{"i": -1, "seq": next(seq)} for _ in range(1000)])
    t1 = time.perf_counter()
    rec(f"{tag or 'as is'} | enqueue_many(1000) (ms)", (t1 - t0) * 1000)
    t0 = time.perf_counter()
    noop.enqueue_many([{"i": -1, "seq": next(seq)} for _ in range(10000)])
    t1 = time.perf_counter()
    rec(f"{tag or 'as is'} | enqueue_many(10000) (jobs/s)", 10000 / (t1 - t0))


variants = ["", "DROP INDEX ultimate_jobs_job_state", "SET synchronous_commit = off"]
try:
    for r in range(int(os.environ.get("ROUNDS", "3"))):
        for v in variants:
            one_round(v)
        print("round", r, os.getloadavg()[0], flush=True)
finally:
    measure.drop_database()
for k, v in res.items():
    print(f"{k:90} median {statistics.median(v):9.1f}   " + " ".join(f"{x:.1f}" for x in v))
