"""Pickup behind PgBouncer: a real ``jobs_worker`` process through a transaction-mode pooler without
``LISTEN_DATABASES`` (the wake probe fails, the worker polls), with ``LISTEN_DATABASES`` pointing at
a direct alias (LISTEN speed), and through a session-mode pooler (LISTEN kept on its session).

Ad hoc, run by hand (the numbers are in CHANGELOG.md, issue 24); not part of make bench::

    PYTHONPATH=$PWD .venv/bin/python bench/experiments/pooler_pickup.py      # JOBS=200 GAP=0.25

Needs PostgreSQL on 127.0.0.1:5432 and Debian's ``pgbouncer`` (started here as tests/support/pgbouncer.py
does, on 6433 and 6434). Per mode, JOBS jobs are enqueued one at a time (directly: a NOTIFY reaches
every LISTEN on the database whichever connection sends it) with a random gap around GAP seconds,
each waiting for the last to start; pickup is ``started_at - created_at`` by the database's clock.
The worker runs the product's defaults: POLL_INTERVAL 250ms, IDLE_POLL_MAX 2s.
"""

# ruff: noqa: E402  (Django is set up before the app's modules are imported)

import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DB = f"uj_pooler_bench_{os.getpid()}"
JOBS = int(os.environ.get("JOBS", "200"))
GAP = float(os.environ.get("GAP", "0.25"))
os.environ.update({"JOBS_TEST_DB": "postgres", "JOBS_TEST_DB_NAME": DB, "DJANGO_SETTINGS_MODULE": "tests.settings"})

with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as admin:
    admin.execute(f'CREATE DATABASE "{DB}"')

import django

django.setup()
from django.core.management import call_command

from tests.app.jobs import noop
from tests.support.pgbouncer import SESSION_PORT, TRANSACTION_PORT, PgBouncer
from ultimate_jobs.models import Job

MODES = {
    "transaction pooler, no LISTEN_DATABASES (poll)": {"JOBS_TEST_POOLER_PORT": str(TRANSACTION_PORT)},
    "transaction pooler, LISTEN_DATABASES direct": {"JOBS_TEST_POOLER_PORT": str(TRANSACTION_PORT),
                                                    "JOBS_TEST_LISTEN_DATABASES": "default=direct"},
    "session pooler": {"JOBS_TEST_POOLER_PORT": str(SESSION_PORT)},
}


def measure(mode: str, env: dict[str, str], rng: random.Random) -> list[float]:
    log = Path(f"/tmp/uj-pooler-bench-{os.getpid()}-{list(MODES).index(mode)}.log")
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "JOBS_TEST_POLL_INTERVAL": "250ms",
                "JOBS_TEST_IDLE_POLL_MAX": "2s", **env}
    with open(log, "wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "django", "jobs_worker", "--settings", "tests.settings",
                                   "--queues", "default", "--concurrency", "4", "-v", "2"], cwd=ROOT, env=full_env,
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "jobs.wake." not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline and worker.poll() is None, log.read_text(errors="replace")
            time.sleep(0.1)
        ids = []
        for n in range(JOBS):
            time.sleep(rng.uniform(GAP * 0.5, GAP * 1.5))
            job = noop.enqueue(key=f"{mode}-{n}")
            ids.append(job.id)
            while not Job.objects.filter(id=job.id, started_at__isnull=False).exists():
                time.sleep(0.005)
        rows = Job.objects.filter(id__in=ids).values_list("created_at", "started_at")
        wake = [line.split(" alias=")[0].split()[-1] for line in log.read_text().splitlines() if "jobs.wake." in line]
        print(f"  worker's wake: {', '.join(sorted(set(wake)))}")
        return sorted((started - created).total_seconds() * 1000 for created, started in rows)
    except BaseException:
        print(log.read_text(errors="replace")[-3000:])
        raise
    finally:
        worker.terminate()
        worker.wait(30)


def main() -> None:
    call_command("migrate", verbosity=0)
    rng = random.Random(24)
    with PgBouncer(port=TRANSACTION_PORT, pool_mode="transaction"), \
            PgBouncer(port=SESSION_PORT, pool_mode="session"):
        for mode, env in MODES.items():
            if os.environ.get("ONLY") and os.environ["ONLY"] not in mode:
                continue
            print(f"{mode}: {JOBS} jobs, one at a time, gap ~{GAP}s")
            ms = measure(mode, env, rng)
            p95 = ms[max(0, round(len(ms) * 0.95) - 1)]
            print(f"  pickup median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, max {ms[-1]:.1f} ms")


try:
    main()
finally:
    from django.db import connections

    connections.close_all()
    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
