"""The drain of two-step durable runs: a def body against an async def body (issue 26).

Each variant pre-enqueues N jobs of one job (untimed), starts one real ``jobs_worker`` (the worker
role only) and polls until all are done; rounds alternate the variants so the machine's noise falls
on each alike. ``jobs/s`` counts from the worker's spawn (start-up included), ``steady`` from the
first completed job. Every job writes two step checkpoints and its settle. ``CPU ms/job`` is the
worker process's CPU time (every thread) from the first completed job to the last, per job: what
the body form costs the worker, which the machine's other load moves far less than the rate.

Ad hoc, run by hand (see docs/scaling.md); not part of make bench.
    .venv/bin/python bench/experiments/async_steps_drain.py [N] [ROUNDS] [CONCURRENCY]
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import statistics
import sys
import time

import _boot  # noqa: F401  (sets up Django on a throwaway bench database; see _boot.py)
import psutil
import psycopg

from bench import measure

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
CONCURRENCY = int(sys.argv[3]) if len(sys.argv) > 3 else 10

from bench.jobs import two_steps, two_steps_async, two_steps_async_def

VARIANTS = {
    "def body, def steps": two_steps,
    "async def body, async def steps": two_steps_async,
    "async def body, def steps": two_steps_async_def,
}


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def drain(handle) -> tuple[float, float, float]:
    from django.conf import settings
    from django.db import connections

    measure.recreate_database()
    base = int(time.time() * 1000) * 100_000
    for start in range(0, N, 1000):
        handle.enqueue_many([{"seq": base + i} for i in range(start, min(N, start + 1000))])
    connections.close_all()
    with psycopg.connect(measure.dsn(settings.DATABASES["default"]["NAME"]), autocommit=True) as conn:
        spawned = time.perf_counter()
        first = None
        first_done = 0
        with measure.running_workers(1, CONCURRENCY, "uj-async-steps-drain.log") as workers:
            while True:
                done = conn.execute(measure.DONE_SQL, {"n": N}).fetchone()[0]
                now = time.perf_counter()
                if first is None and done:
                    first, first_done, first_cpu = now, done, cpu_seconds(workers[0].pid)
                if done >= N:
                    used = cpu_seconds(workers[0].pid) - first_cpu
                    break
                if now - spawned > 600 or workers[0].poll() is not None:
                    raise RuntimeError(f"{handle.name}: stalled at {done}/{N}")
                time.sleep(0.05)
        failed = conn.execute("SELECT count(*) FROM ultimate_jobs_job WHERE state <> 'done'").fetchone()[0]
        if failed:
            raise RuntimeError(f"{handle.name}: {failed} jobs did not end done")
    return N / (now - spawned), (done - first_done) / (now - first), used / (done - first_done) * 1000


results = {name: [] for name in VARIANTS}
try:
    for r in range(ROUNDS):
        for name, handle in VARIANTS.items():
            results[name].append(drain(handle))
            total, steady, cpu = results[name][-1]
            print(f"round {r} {name:34} {total:7.0f} jobs/s  steady {steady:7.0f}  CPU {cpu:.2f} ms/job  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
finally:
    measure.drop_database()
base = statistics.median(s for _, s, _ in results["def body, def steps"])
print(f"\n{N} two-step jobs, 1 worker, concurrency {CONCURRENCY}, medians of {ROUNDS} alternated rounds")
for name, values in results.items():
    total = statistics.median(t for t, _, _ in values)
    steady = statistics.median(s for _, s, _ in values)
    cpu = statistics.median(c for _, _, c in values)
    print(f"{name:34} {total:7.0f} jobs/s  steady {steady:7.0f}  steady/def body {steady / base:.2f}x  "
          f"CPU {cpu:.2f} ms/job")
