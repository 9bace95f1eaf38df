"""What ``ops.queue_stats()`` costs on a table of finished rows, before and after 0013_write_path.

Run by hand (not part of make bench), once per tree, on the same machine in the same sitting::

    ROWS=1000000 .venv/bin/python bench/experiments/report_cost.py                              # this tree
    ROWS=1000000 CODE=/tmp/bench-uj-5e0611c .venv/bin/python bench/experiments/report_cost.py   # before

(``bench/run.py --snapshot 5e0611c --rounds 0`` extracts the snapshot.) Plants ROWS ``done`` rows
(``bench/flat.py``'s planting, then ``VACUUM ANALYZE``) and 1,000 ready ones, then times
``queue_stats()`` 15 times and prints the median and the plan's nodes on the job table.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

ROWS = int(os.environ.get("ROWS", "200000"))
measure.recreate_database()
import psycopg
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench.flat import _PLANT_SQL
from bench.jobs import noop
from ultimate_jobs import ops

with psycopg.connect(measure.dsn(settings.DATABASES["default"]["NAME"]), autocommit=True) as conn:
    conn.execute(_PLANT_SQL, {"state": "done", "rows": ROWS})
    conn.execute("VACUUM ANALYZE ultimate_jobs_job")
noop.enqueue_many([{"i": -1, "seq": s} for s in range(1000)])
with connection.cursor() as c:
    c.execute("ANALYZE ultimate_jobs_job")
ops.queue_stats()
times = []
for _ in range(15):
    t0 = time.perf_counter()
    stats = ops.queue_stats()
    times.append((time.perf_counter() - t0) * 1000)
with CaptureQueriesContext(connection) as seen:
    ops.queue_stats()
sql = next(q["sql"] for q in seen.captured_queries if "ultimate_jobs_job" in q["sql"])
with connection.cursor() as c:
    c.execute("EXPLAIN " + sql)
    scans = [r[0].strip() for r in c.fetchall() if "Scan" in r[0] and "ultimate_jobs_job" in r[0]]
default = next(s for s in stats if s["queue"] == "default")
print(f"{ROWS:,} done rows + 1,000 ready: queue_stats median {statistics.median(times):.1f} ms "
      f"({min(times):.1f}-{max(times):.1f}); done={default['done']:,} ready={default['ready']:,}")
for line in scans:
    print("  ", line)
measure.drop_database()
