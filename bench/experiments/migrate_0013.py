"""How long 0013_write_path takes on a large job table, and whether enqueues wait for it.

Run by hand (not part of make bench)::

    ROWS=1000000 .venv/bin/python bench/experiments/migrate_0013.py

Migrates a fresh database to 0011, plants ROWS finished jobs (one ``INSERT ... SELECT
generate_series``, then ``VACUUM ANALYZE``), and runs ``migrate ultimate_jobs 0013`` while a thread
enqueues one job at a time (autocommit) for as long as it runs. Prints the migration's wall time
and the enqueues' latencies during it: a long lock would show as an enqueue waiting as long as an
index build.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import threading
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

ROWS = int(os.environ.get("ROWS", "200000"))
measure.recreate_database()
import psycopg
from django.conf import settings
from django.core.management import call_command
from django.db import connections

from bench.flat import _PLANT_SQL

call_command("migrate", "ultimate_jobs", "0011", verbosity=0)
dsn = measure.dsn(settings.DATABASES["default"]["NAME"])
with psycopg.connect(dsn, autocommit=True) as conn:
    t0 = time.perf_counter()
    conn.execute(_PLANT_SQL, {"state": "done", "rows": ROWS})
    conn.execute("VACUUM ANALYZE ultimate_jobs_job")
    print(f"planted {ROWS:,} done rows in {time.perf_counter() - t0:.1f} s")

latencies: list[float] = []
stop = threading.Event()


def enqueue_loop() -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        n = 0
        while not stop.is_set():
            n += 1
            t = time.perf_counter()
            conn.execute(
                "INSERT INTO ultimate_jobs_job (id, run_id, name, queue, priority, state, payload, idempotency_key,"
                " attempt, max_attempts, run_at, created_at, updated_at)"
                " VALUES (gen_random_uuid(), gen_random_uuid(), 'bench.noop', 'default', 0, 'ready', '{}',"
                " %s, 0, 3, now(), now(), now())", [f"during-{n}"])
            latencies.append(time.perf_counter() - t)


thread = threading.Thread(target=enqueue_loop)
thread.start()
time.sleep(0.5)
t0 = time.perf_counter()
call_command("migrate", "ultimate_jobs", "0013", verbosity=0)
took = time.perf_counter() - t0
stop.set()
thread.join()
connections.close_all()
ms = sorted(x * 1000 for x in latencies)
print(f"migrate 0013 on {ROWS:,} rows: {took:.1f} s; {len(ms)} enqueues meanwhile: "
      f"median {statistics.median(ms):.1f} ms, p99 {ms[int(len(ms) * 0.99)]:.1f} ms, max {ms[-1]:.1f} ms")
measure.drop_database()
