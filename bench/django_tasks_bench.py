"""A no-op Django ``@task`` through UltimateJobsBackend against django-tasks-db's DatabaseBackend,
in the same run: single-enqueue throughput (one ``enqueue()`` per commit, one process) and drain
throughput (pre-enqueued tasks, worker processes started, polled until all are done).

    .venv/bin/python bench/django_tasks_bench.py --dbtasks-python /tmp/uj-bench-djtasks/bin/python \
        --enqueue 2000 --drain 5000 --procs 2 --rounds 3

The django-tasks-db venv: ``python3 -m venv /tmp/uj-bench-djtasks && /tmp/uj-bench-djtasks/bin/pip
install 'Django>=5.2,<5.3' django-tasks django-tasks-db 'psycopg[binary]'``. Each backend gets its
own database (``bench_djt_<backend>``, dropped and recreated per measurement). Rounds interleave
the backends; the summary is the median of each. Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKERS = {
    "ultimate_jobs": ["jobs_worker", "--queues", "default", "--concurrency", "10", "--roles", "worker"],
    "dbtasks": ["db_worker", "--no-startup-delay", "--interval", "0.1", "--queue-name", "default", "--no-reload"],
}
DONE_SQL = {
    "ultimate_jobs": "SELECT count(*) FROM ultimate_jobs_job WHERE state = 'done'",
    "dbtasks": "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status = 'SUCCESSFUL'",
}


def child(metric: str, n: int, procs: int) -> dict[str, object]:
    """One measurement in this process (settings from BENCH_TASKS_BACKEND)."""
    import django
    import psycopg

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.django_tasks_settings")
    from django.conf import settings

    name = settings.DATABASES["default"]["NAME"]
    with psycopg.connect(host=settings.DATABASES["default"]["HOST"], user=settings.DATABASES["default"]["USER"],
                         dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bench.django_tasks_app import noop

    call_command("migrate", verbosity=0)
    backend = os.environ["BENCH_TASKS_BACKEND"]
    if metric == "enqueue":
        for i in range(20):
            noop.enqueue(i)  # warm-up: the connection and the statements
        start = time.perf_counter()
        for i in range(n):
            noop.enqueue(i)  # autocommit: one row, one commit each
        elapsed = time.perf_counter() - start
        return {"backend": backend, "metric": "enqueue", "n": n, "per_s": round(n / elapsed, 1)}
    for i in range(n):
        noop.enqueue(i)  # not timed
    connection.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    workers = [subprocess.Popen([sys.executable, "-m", "django", *WORKERS[backend], "--settings",
                                 "bench.django_tasks_settings"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(procs)]
    try:
        with connection.cursor() as cursor:
            while True:
                cursor.execute(DONE_SQL[backend])
                if cursor.fetchone()[0] >= n:
                    break
                time.sleep(0.05)
        elapsed = time.perf_counter() - start
    finally:
        for proc in workers:
            proc.kill()
            proc.wait()
    return {"backend": backend, "metric": "drain", "n": n, "procs": procs, "per_s": round(n / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("METRIC", "N", "PROCS"), help=argparse.SUPPRESS)
    parser.add_argument("--dbtasks-python", required=False, help="python of a venv with django-tasks-db")
    parser.add_argument("--enqueue", type=int, default=2000)
    parser.add_argument("--drain", type=int, default=5000)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]))))
        return
    pythons = {"ultimate_jobs": sys.executable, "dbtasks": args.dbtasks_python}
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for metric, n in (("enqueue", args.enqueue), ("drain", args.drain)):
            for backend, python in pythons.items():
                env = {**os.environ, "BENCH_TASKS_BACKEND": backend, "PYTHONPATH": str(ROOT),
                       "DJANGO_SETTINGS_MODULE": "bench.django_tasks_settings"}
                out = subprocess.run([python, str(Path(__file__).resolve()), "--child", metric, str(n),
                                      str(args.procs)], cwd=ROOT, env=env, capture_output=True, text=True,
                                     check=True)
                line = out.stdout.strip().splitlines()[-1]
                print(line, flush=True)
                results.setdefault((metric, backend), []).append(json.loads(line)["per_s"])
    for metric in ("enqueue", "drain"):
        ours = statistics.median(results[(metric, "ultimate_jobs")])
        theirs = statistics.median(results[(metric, "dbtasks")])
        print(f"{metric}: ultimate_jobs {ours:.0f}/s, django-tasks-db {theirs:.0f}/s, ratio {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
