"""How much of the 2-worker drain is start-up: spawn -> first body started, and first start -> last finish.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench. ``make bench``'s drain figure counts
from the spawn, so a worker's interpreter, Django and import time are part of it; this splits them out
from the database's own timestamps (``started_at``/``finished_at``, the server's clock).

    .venv/bin/python bench/experiments/drain_startup.py [ROUNDS]
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import statistics
import sys
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)
import psycopg
from django.conf import settings
from django.db import connections

from bench import measure

N = 10_000
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
startup, drained = [], []
for _ in range(rounds):
    measure.recreate_database()
    measure.enqueue_many(N)
    connections.close_all()
    with psycopg.connect(measure.dsn(settings.DATABASES["default"]["NAME"]), autocommit=True) as conn:
        spawned = time.time()
        with measure.running_workers(2, 10, "uj-bench-drain-startup.log"):
            while conn.execute("SELECT count(*) FROM ultimate_jobs_job WHERE state = 'done'").fetchone()[0] < N:
                time.sleep(0.02)
        first, last = conn.execute("SELECT extract(epoch FROM min(started_at))::float8,"
                                   " extract(epoch FROM max(finished_at))::float8 FROM ultimate_jobs_job").fetchone()
    startup.append(first - spawned)
    drained.append(last - first)
    print(f"spawn -> first body {first - spawned:.3f} s, first start -> last finish {last - first:.3f} s "
          f"({N / (last - first):,.0f} jobs/s), whole {N / (last - spawned):,.0f} jobs/s", flush=True)
measure.drop_database()
print(f"median: start-up {statistics.median(startup):.3f} s, drain {statistics.median(drained):.3f} s "
      f"({N / statistics.median(drained):,.0f} jobs/s after start-up)")
