"""Single-enqueue variants, interleaved in one process, same DB .

Ad hoc, run by hand (see bench/RESULTS.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against (b6b67e6; names updated for the db/postgres/ layout at 8be58f4).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import os
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import psycopg
from django.db import connection

from bench.jobs import noop
from ultimate_jobs import enqueue as enq
from ultimate_jobs.db.postgres import jobs as postgres

opts = noop.using()
seq = itertools.count(10**9)
N = int(os.environ.get("N", "1000"))


def one(notify=False):
    r = opts.row({"i": -1, "seq": next(seq)})
    return {**postgres.row_params(r), "now": None, "notify": notify}


def cur():
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


real_wake = enq._wake_due


def lib_nowake():
    enq._wake_due = lambda *a, **k: ([], [])
    try:
        noop.enqueue(i=-1, seq=next(seq))
    finally:
        enq._wake_due = real_wake


def sync(v):
    with cur() as c:
        c.execute(f"SET synchronous_commit = {v}")


variants = {
    "library noop.enqueue": lambda: noop.enqueue(i=-1, seq=next(seq)),
    "library, wake disabled": lib_nowake,
    "JOB_INSERT_ONE, unprepared (as the store does)": lambda: (
        cur().execute(postgres.JOB_INSERT_ONE, one()).fetchall()
    ),
    "JOB_INSERT_ONE, prepare=True": lambda: (
        cur().execute(postgres.JOB_INSERT_ONE, one(), prepare=True).fetchall()
    ),
    "SELECT 1 round trip (no commit)": lambda: cur().execute("SELECT 1").fetchall(),
}
res = {k: [] for k in variants}
res["library, synchronous_commit=off"] = []
for rnd in range(3):
    for name, fn in list(variants.items()) + [("library, synchronous_commit=off", None)]:
        if fn is None:
            sync("off")
            fn_ = variants["library noop.enqueue"]
        else:
            fn_ = fn
        for _ in range(20):
            fn_()
        t0 = time.perf_counter()
        for _ in range(N):
            fn_()
        res[name].append((time.perf_counter() - t0) / N * 1e6)
        if fn is None:
            sync("on")
    print("round", rnd, os.getloadavg()[0], flush=True)
for k, v in res.items():
    print(
        f"{k:48} median {statistics.median(v):7.0f} us ({1e6 / statistics.median(v):6.0f}/s)   rounds: "
        + " ".join(f"{x:.0f}" for x in v)
    )
measure.drop_database()
