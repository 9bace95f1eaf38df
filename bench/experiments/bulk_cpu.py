"""The enqueue_many write path's client CPU and wall time: the COPY against the INSERT, 1,000 rows.

Run by hand (not part of make bench); the two alternate, ROUNDS rounds, medians::

    ROUNDS=10 .venv/bin/python bench/experiments/bulk_cpu.py

Client CPU is ``time.process_time()`` around one store call (this process's CPU: building the
statement or the COPY stream, psycopg's dumping; not the server's), wall time ``perf_counter``.
Both paths get the same pre-built rows, sorted as ``job_insert_many`` sorts them.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import itertools
import os
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
from bench.jobs import noop
from ultimate_jobs.db import store_for

ROUNDS = int(os.environ.get("ROUNDS", "10"))
store = store_for("default")
seq = itertools.count(10**9)
bound = noop.using()


def rows(n):
    return sorted((bound.row({"i": -1, "seq": next(seq)}) for _ in range(n)),
                  key=lambda r: (r.name, r.tenant_id or "", r.idempotency_key))


SEND = {"copy": lambda r: store.job_copy_many(rows=r, now=None, notify=["default"]),
        "insert": lambda r: store._job_insert_chunk(r, None, ["default"])}
for send in SEND.values():
    send(rows(100))
res = {name: [] for name in SEND}
for rnd in range(ROUNDS):
    for name in (list(SEND) if rnd % 2 == 0 else list(reversed(SEND))):
        batch = rows(1000)
        c0, w0 = time.process_time(), time.perf_counter()
        SEND[name](batch)
        res[name].append(((time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000))
for name, v in res.items():
    print(f"{name:7} 1,000 rows: client CPU median {statistics.median(a for a, _ in v):.2f} ms, "
          f"wall median {statistics.median(b for _, b in v):.1f} ms (min {min(b for _, b in v):.1f})")
measure.drop_database()
