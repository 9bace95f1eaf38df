"""Where an idle pickup's time goes: one in-process worker, hooks stamping each step.

Ad hoc, run by hand (see bench/RESULTS.md); not part of make bench. Monkeypatches internals, so it
tracks the code it was written against (b6b67e6; hooks moved to the runtime/ layout at 8be58f4).
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import random
import statistics
import threading
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)

from bench import measure

measure.recreate_database()
import bench.jobs as bj
from ultimate_jobs import Worker
from ultimate_jobs.runtime import claims as wmod

stamps = {}
cur = {}


def stamp(k):
    if k not in cur:
        cur[k] = time.perf_counter()


w = Worker(queues=["default"], concurrency=10)
orig_wake = w.wake


def wake(queue=""):
    stamp("1 listener got NOTIFY")
    orig_wake(queue)


w.wake = wake
orig_run_once = w.run_once
configured = []


def run_once():
    if not configured:
        from django.db import connection

        connection.ensure_connection()
        if os.environ.get("PREPARE"):
            connection.connection.prepare_threshold = 0
        if os.environ.get("PLAN_MODE"):  # auto, force_generic_plan, force_custom_plan
            connection.connection.execute(f"SET plan_cache_mode = {os.environ['PLAN_MODE']}")
        if os.environ.get("SYNC_OFF"):
            connection.connection.execute("SET synchronous_commit = off")
        configured.append(1)
    stamp("2 loop pass starts")
    return orig_run_once()


w.run_once = run_once
orig_keep = w.heartbeat.keep


def keep():
    t0 = time.perf_counter()
    kept = orig_keep()
    cur.setdefault("rescue ms", (time.perf_counter() - t0) * 1000)
    return kept


w.heartbeat.keep = keep
store = w.store
orig_sc = store.job_settle_and_claim


def sc(**kw):
    stamp("3 settle+claim sent")
    r = orig_sc(**kw)
    if any(r.claimed.values()):
        stamp("4 claim answered")
    return r


store.job_settle_and_claim = sc
orig_attempt = wmod.run_attempt


def run_attempt(*a, **k):
    stamp("5 body thread starts attempt")
    return orig_attempt(*a, **k)


wmod.run_attempt = run_attempt
done = threading.Event()


def fn(ctx, *, i, seq):
    stamp("6 job body first line")
    done.set()


bj.noop.fn = fn
t = threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True)
t.start()
time.sleep(2)
rows = []
for i in range(int(os.environ.get("SAMPLES", "60"))):  # SAMPLES=N: more samples
    time.sleep(random.uniform(0.1, 0.5))
    cur.clear()
    done.clear()
    bj.noop.enqueue(i=i, seq=10**9 + i)
    t0 = time.perf_counter()
    done.wait(5)
    time.sleep(0.002)
    if i >= 5 and "6 job body first line" in cur and "1 listener got NOTIFY" in cur:
        rows.append({k: ((v - t0) * 1000 if not k.startswith("rescue") else v) for k, v in cur.items()})
w.stop()
t.join(10)
measure.drop_database()
keys = [
    "1 listener got NOTIFY",
    "2 loop pass starts",
    "3 settle+claim sent",
    "4 claim answered",
    "5 body thread starts attempt",
    "6 job body first line",
]
print(f"{len(rows)} woken samples (those with a NOTIFY); ms after enqueue() returned, median:")
for k in keys:
    vals = [r[k] for r in rows if k in r]
    print(f"  {k:32} {statistics.median(vals):6.2f}   (p90 {sorted(vals)[int(0.9 * len(vals))]:6.2f})")
resc = [r["rescue ms"] for r in rows if "rescue ms" in r]
print(
    f"  passes that ran the lease rescue first: {len(resc)}/{len(rows)}, "
    f"rescue median {statistics.median(resc) if resc else 0:.2f} ms"
)
